package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
)

// An op's params on HTTP: a route's wildcards and a GET's query parameters
// name the params' fields by their JSON names (or a field's `query` tag),
// here and in Client alike.

// wildcardsOf are the wildcard names of a route's path.
func wildcardsOf(path string) []string {
	var names []string
	for seg := range strings.SplitSeq(path, "/") {
		if strings.HasPrefix(seg, "{") && strings.HasSuffix(seg, "}") {
			names = append(names, strings.TrimSuffix(seg[1:], "}"))
		}
	}
	return names
}

// param is one field of a params struct as HTTP names it.
type param struct {
	name  string // JSON name
	query string // query parameter name
	index []int
}

// paramsOf are the fields of the struct type t (embedded structs' too).
func paramsOf(t reflect.Type) []param {
	var out []param
	for _, f := range reflect.VisibleFields(t) {
		if !f.IsExported() || f.Anonymous {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		q := f.Tag.Get("query")
		if q == "" {
			q = name
		}
		out = append(out, param{name: name, query: q, index: f.Index})
	}
	return out
}

// setField sets the string field named name (JSON name) of *p to v; a
// wildcard always names one.
func setField(p any, name, v string) {
	rv := reflect.ValueOf(p).Elem()
	for _, f := range paramsOf(rv.Type()) {
		if f.name == name {
			rv.FieldByIndex(f.index).SetString(v)
		}
	}
}

// bindQuery fills *p from a GET's query: strings, numbers, booleans, RFC
// 3339 times, and lists (repeated or comma-separated). A value that does
// not parse is VALIDATION_ERROR; unknown parameters are ignored.
func bindQuery(p any, q url.Values) error {
	rv := reflect.ValueOf(p).Elem()
	for _, f := range paramsOf(rv.Type()) {
		vals, ok := q[f.query]
		if !ok || len(vals) == 0 {
			continue
		}
		fv := rv.FieldByIndex(f.index)
		v := vals[len(vals)-1]
		bad := func(want string) error {
			return api.Errorf(api.CodeValidation, "%s %q: want %s", f.query, v, want)
		}
		switch {
		case fv.Type() == reflect.TypeFor[time.Time]():
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return bad("an RFC 3339 time")
			}
			fv.Set(reflect.ValueOf(t))
		case fv.Kind() == reflect.String:
			fv.SetString(v)
		case fv.Kind() == reflect.Int || fv.Kind() == reflect.Int64:
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return bad("a non-negative integer")
			}
			fv.SetInt(n)
		case fv.Kind() == reflect.Bool:
			b, err := strconv.ParseBool(v)
			if err != nil {
				return bad("true or false")
			}
			fv.SetBool(b)
		case fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String:
			list := reflect.MakeSlice(fv.Type(), 0, len(vals))
			for _, v := range vals {
				for item := range strings.SplitSeq(v, ",") {
					if item != "" {
						list = reflect.Append(list, reflect.ValueOf(item).Convert(fv.Type().Elem()))
					}
				}
			}
			fv.Set(list)
		default:
			return api.Errorf(api.CodeInvalidRequest, "%s: not a query parameter", f.query)
		}
	}
	return nil
}

// encodeQuery is the query of a GET with params p: its non-zero fields
// but those in path.
func encodeQuery(p any, path []string) url.Values {
	q := url.Values{}
	rv := reflect.Indirect(reflect.ValueOf(p))
	for _, f := range paramsOf(rv.Type()) {
		fv := rv.FieldByIndex(f.index)
		if fv.IsZero() || containsName(path, f.name) {
			continue
		}
		switch v := fv.Interface().(type) {
		case time.Time:
			q.Set(f.query, v.Format(time.RFC3339Nano))
		default:
			if fv.Kind() == reflect.Slice {
				for i := range fv.Len() {
					q.Add(f.query, fmt.Sprint(fv.Index(i).Interface()))
				}
				continue
			}
			q.Set(f.query, fmt.Sprint(v))
		}
	}
	return q
}

// fieldOf is the string field of p named name (JSON name), "" when none.
func fieldOf(p any, name string) string {
	rv := reflect.Indirect(reflect.ValueOf(p))
	for _, f := range paramsOf(rv.Type()) {
		if f.name == name {
			return fmt.Sprint(rv.FieldByIndex(f.index).Interface())
		}
	}
	return ""
}

func containsName(names []string, n string) bool {
	for _, x := range names {
		if x == n {
			return true
		}
	}
	return false
}

// shape is how an op's result travels on HTTP when not as its JSON: the
// server writes it (write), the client reads it back (read). The one
// table of what HTTP maps differently.
type shape struct {
	write func(h http.Header, res any) any
	read  func(h http.Header, body []byte, out any) error
}

var shapes = map[string]shape{
	// A new run's location, besides its id.
	"run": {
		write: func(h http.Header, res any) any {
			h.Set("Location", "/v1/runs/"+res.(*runs.Started).RunID)
			return res
		},
	},
	// The events themselves, as an array; Drover-More: true when more
	// follow the last one.
	"events": {
		write: func(h http.Header, res any) any {
			r := res.(*api.EventsResult)
			if r.More {
				h.Set("Drover-More", "true")
			}
			return r.Events
		},
		read: func(h http.Header, body []byte, out any) error {
			r := out.(**api.EventsResult)
			*r = &api.EventsResult{More: h.Get("Drover-More") == "true"}
			return json.Unmarshal(body, &(*r).Events)
		},
	},
}
