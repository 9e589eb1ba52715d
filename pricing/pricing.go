// Package pricing prices models: the built-in table of the vendors' list
// prices (prices.json, dated), price files (DROVER_PRICES, drover run
// --prices) and the lookup of a model's price in them (docs/limits.md).
// An unknown price is absent, never zero (ACC-2).
package pricing

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// Env names an environment variable holding the path of a JSON price file
// (see Load), read by the engine when it resolves a run. Its entries win
// over the built-in table; Options.Prices win over both.
const Env = "DROVER_PRICES"

//go:embed prices.json
var builtinJSON []byte

// builtin is prices.json decoded once; a table that does not decode is a
// build defect, caught by the package's tests.
var builtin = func() (t struct {
	AsOf   string                  `json:"asOf"`
	Prices map[string]drover.Price `json:"prices"`
}) {
	if err := json.Unmarshal(builtinJSON, &t); err != nil {
		panic("pricing: prices.json: " + err.Error())
	}
	return t
}()

// AsOf is the date of the built-in table: when drover's authors last
// checked the vendors' list prices. Prices change; a run that depends on
// them (a budget) should pass its own (Options.Prices, Env).
func AsOf() string { return builtin.AsOf }

// Builtin returns a copy of the built-in table: a model name, or the
// prefix of a family of model names, to its list price as of AsOf.
func Builtin() map[string]drover.Price { return maps.Clone(builtin.Prices) }

// Load reads a JSON price file: an object mapping a model name or prefix
// to a Price ({"model": {"input": 1.25, "output": 10, "cacheRead": 0.125}},
// USD per million tokens). An unknown field, a negative price or an
// unreadable file is an error naming the file.
func Load(path string) (map[string]drover.Price, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read prices: %w", err)
	}
	var m map[string]drover.Price
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("prices file %s: %w (want {\"model\": {\"input\": 1.25, \"output\": 10, \"cacheRead\": 0.125}} in USD per million tokens)", path, err)
	}
	for k, p := range m {
		if err := p.Validate(k); err != nil {
			return nil, fmt.Errorf("prices file %s: %w", path, err)
		}
	}
	return m, nil
}

// Tables are the price tables of a run, in the order they are consulted:
// the run's own (Options.Prices), the file named by Env if set, then the
// built-in table. A file that cannot be read is an error naming Env.
func Tables(own map[string]drover.Price) ([]map[string]drover.Price, error) {
	tables := []map[string]drover.Price{own}
	if path := os.Getenv(Env); path != "" {
		file, err := Load(path)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", Env, err)
		}
		tables = append(tables, file)
	}
	return append(tables, builtin.Prices), nil
}

// Lookup finds model's price in the tables, in order (the first table
// with a match wins): an entry named exactly as the model, else the
// longest entry that is a prefix of it ending where a "-", "@" or ":"
// follows ("gpt-5" prices "gpt-5-2025-08-07" but not "gpt-5.5" or
// "gpt-5-mini" when that has its own entry). A provider prefix ("openai/",
// "models/") is ignored, and names compare case-insensitively.
func Lookup(model string, tables ...map[string]drover.Price) (drover.Price, bool) {
	_, _, p, ok := Find(model, tables...)
	return p, ok
}

// Find is Lookup that also says which entry priced model: its key and
// the index of its table in tables.
func Find(model string, tables ...map[string]drover.Price) (key string, table int, _ drover.Price, _ bool) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if name == "" {
		return "", 0, drover.Price{}, false
	}
	for ti, t := range tables {
		best, found := "", false
		for _, k := range slices.Sorted(maps.Keys(t)) {
			key := strings.ToLower(k)
			if i := strings.LastIndexByte(key, '/'); i >= 0 {
				key = key[i+1:]
			}
			if key == name {
				return k, ti, t[k], true
			}
			if strings.HasPrefix(name, key) && strings.ContainsRune("-@:", rune(name[len(key)])) && len(k) > len(best) {
				best, found = k, true
			}
		}
		if found {
			return best, ti, t[best], true
		}
	}
	return "", 0, drover.Price{}, false
}
