package cli

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/termtext"
	"github.com/drover-run/drover/pricing"
	"github.com/spf13/cobra"
)

// priceRow is one price in force, as drover prices shows it.
type priceRow struct {
	Model string `json:"model"`
	drover.Price
	// From names the table: "built-in (as of DATE)", "$DROVER_PRICES
	// (PATH)" or "--prices (PATH)".
	From string `json:"from"`
	// Shadowed says an earlier table has the same entry: this one is not
	// used.
	Shadowed bool `json:"shadowed,omitempty"`
}

// newPricesCmd is drover prices: the prices in force, where each comes
// from, and which prices a model (ACC-2).
func newPricesCmd(e *env) *cobra.Command {
	var file string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "prices [MODEL…]",
		Short: "List the model prices drover estimates costs with, and where each comes from; or say which prices MODEL",
		Long: `List the prices drover computes a run's cost with when its vendor reports
none (the cost is then marked estimated, "~$"): USD per million tokens of
input, output, cache read and cache write, with each row's source. The tables
are consulted in order: --prices FILE (as drover run --prices), the file
named by $DROVER_PRICES, then the built-in table (dated). With MODEL, say
which entry prices each model, or that none does (exit 1): a run of a model
without a price has no cost, never a cost of zero.`,
		RunE: func(cmd *cobra.Command, models []string) error {
			var tables []map[string]drover.Price
			var names []string
			if file != "" {
				t, err := pricing.Load(file)
				if err != nil {
					return usagef("--prices: %v", err)
				}
				tables, names = append(tables, t), append(names, "--prices ("+file+")")
			}
			if path := os.Getenv(pricing.Env); path != "" {
				t, err := pricing.Load(path)
				if err != nil {
					return usagef("$%s: %v", pricing.Env, err)
				}
				tables, names = append(tables, t), append(names, "$"+pricing.Env+" ("+path+")")
			}
			tables, names = append(tables, pricing.Builtin()), append(names, "built-in (as of "+pricing.AsOf()+")")
			if len(models) > 0 {
				return priceModels(e, tables, names, models, asJSON)
			}
			var rows []priceRow
			seen := map[string]bool{}
			for i, t := range tables {
				for _, k := range slices.Sorted(maps.Keys(t)) {
					key := strings.ToLower(k)
					rows = append(rows, priceRow{Model: k, Price: t[k], From: names[i], Shadowed: seen[key]})
					seen[key] = true
				}
			}
			if asJSON {
				return printList(e, true, rows, nil, nil)
			}
			tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "MODEL\tINPUT\tOUTPUT\tCACHE READ\tCACHE WRITE\tFROM\tSOURCE")
			for _, r := range rows {
				from := r.From
				if r.Shadowed {
					from += ", not used: an earlier table has it"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", termtext.Strip(r.Model), usd(r.Input), usd(r.Output), usd(r.CacheRead),
					usd(r.CacheWrite), termtext.Strip(from), termtext.Strip(orDash(r.Source)))
			}
			fmt.Fprintln(tw, "(USD per million tokens)")
			return tw.Flush()
		},
	}
	cmd.Flags().StringVar(&file, "prices", "", "a JSON price file consulted first, as drover run --prices takes it")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON lines, one price a line")
	return cmd
}

// priceModels says which entry prices each of models; exit 1 when one has
// no price.
func priceModels(e *env, tables []map[string]drover.Price, names, models []string, asJSON bool) error {
	missing := false
	enc := json.NewEncoder(e.stdout)
	for _, m := range models {
		key, ti, p, ok := pricing.Find(m, tables...)
		missing = missing || !ok
		switch {
		case asJSON && ok:
			_ = enc.Encode(map[string]any{"model": m, "entry": key, "price": p, "from": names[ti]})
		case asJSON:
			_ = enc.Encode(map[string]any{"model": m, "price": nil})
		case ok:
			fmt.Fprintf(inert{e.stdout}, "%s: %s in / %s out", m, usd(p.Input), usd(p.Output))
			if p.CacheRead > 0 || p.CacheWrite > 0 {
				fmt.Fprintf(inert{e.stdout}, " / %s cache read / %s cache write", usd(p.CacheRead), usd(p.CacheWrite))
			}
			fmt.Fprintf(inert{e.stdout}, " per million tokens, entry %q of %s\n", key, names[ti])
		default:
			fmt.Fprintf(inert{e.stdout}, "%s: no price (its runs have no cost; give one with --prices or $%s)\n", m, pricing.Env)
		}
	}
	if missing {
		return exitError{ExitFailure}
	}
	return nil
}

func usd(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("$%g", v)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
