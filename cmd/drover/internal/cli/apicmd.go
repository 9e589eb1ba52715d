package cli

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/spf13/cobra"
)

// newAPICmd is `drover api`: every operation of the service (api.Ops) as a
// command of its own, with a flag for each field of its params and its
// result printed as JSON, locally or against a server (--server). An
// operation added to the service is a command here with nothing written
// for it; the commands above are the ones written for people.
func newAPICmd(e *env) *cobra.Command {
	ops := e.ops
	if ops == nil {
		ops = api.Ops
	}
	var db string
	cmd := &cobra.Command{
		Use:   "api [OP]",
		Short: "Call any operation of drover's service and print its result as JSON",
		Long: `Call an operation of drover's service (the same operations as the JSON-lines
protocol and the HTTP API) and print its result as one JSON object. Each
field of the operation's params is a flag (lists: repeat it or separate
with commas); --params gives them all as one JSON object instead. Without
an operation, list them.`,
		Example: `  drover api list --status running
  drover api get --runId run_…
  drover api --server http://127.0.0.1:8765 agents
  drover api check --params '{"agent":"claude","prompt":"x","options":{"tier":"dry-run"}}'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			for _, op := range ops {
				fmt.Fprintf(tw, "%s\t%s\n", op.Name, op.Summary)
			}
			return tw.Flush()
		},
	}
	addDBFlag(cmd, &db)
	for _, op := range ops {
		cmd.AddCommand(newOpCmd(e, op, &db))
	}
	return cmd
}

// newOpCmd is `drover api OP`.
func newOpCmd(e *env, op api.Op, db *string) *cobra.Command {
	var raw string
	p := op.NewParams()
	cmd := &cobra.Command{
		Use:   op.Name,
		Short: op.Summary,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			params := p
			if raw != "" {
				if cmd.Flags().NFlag() > 1 {
					return usagef("--params gives every field: no other flag goes with it")
				}
				params = op.NewParams()
				dec := json.NewDecoder(strings.NewReader(raw))
				dec.DisallowUnknownFields()
				if err := dec.Decode(params); err != nil {
					return usagef("--params: %v", err)
				}
			}
			return e.withService(ctx, *db, true, runs.Config{}, func(svc api.Service) error {
				res, err := op.Call(ctx, svc, params)
				if err != nil {
					return serviceError(err)
				}
				return json.NewEncoder(e.stdout).Encode(res)
			})
		},
	}
	cmd.Flags().StringVar(&raw, "params", "", "the operation's params as one JSON object")
	fl := cmd.Flags()
	rv := reflect.ValueOf(p).Elem()
	for _, f := range reflect.VisibleFields(rv.Type()) {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || f.Anonymous || name == "-" || name == "" {
			continue
		}
		usage := f.Tag.Get("jsonschema")
		ptr := rv.FieldByIndex(f.Index).Addr().Interface()
		switch v := ptr.(type) {
		case *string:
			fl.StringVar(v, name, "", usage)
		case *int:
			fl.IntVar(v, name, 0, usage)
		case *int64:
			fl.Int64Var(v, name, 0, usage)
		case *bool:
			fl.BoolVar(v, name, false, usage)
		case *[]string:
			fl.StringSliceVar(v, name, nil, usage)
		case *time.Time:
			fl.Var(&timeFlag{v}, name, usage+" (RFC 3339)")
		default:
			if f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String {
				fl.Var(&stringsFlag{rv.FieldByIndex(f.Index)}, name, usage)
			}
			// Other fields (nested objects) only through --params.
		}
	}
	return cmd
}

// timeFlag is a time.Time flag in RFC 3339.
type timeFlag struct{ t *time.Time }

func (f *timeFlag) String() string {
	if f.t == nil || f.t.IsZero() {
		return ""
	}
	return f.t.Format(time.RFC3339)
}

func (f *timeFlag) Set(s string) error {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return fmt.Errorf("want an RFC 3339 time, e.g. 2026-11-28T09:00:00Z")
	}
	*f.t = t
	return nil
}

func (f *timeFlag) Type() string { return "time" }

// stringsFlag is a flag of a slice of a string type (store.RunStatus).
type stringsFlag struct{ v reflect.Value }

func (f *stringsFlag) String() string { return "" }

func (f *stringsFlag) Set(s string) error {
	for item := range strings.SplitSeq(s, ",") {
		if item != "" {
			f.v.Set(reflect.Append(f.v, reflect.ValueOf(item).Convert(f.v.Type().Elem())))
		}
	}
	return nil
}

func (f *stringsFlag) Type() string { return "strings" }
