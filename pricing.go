package drover

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// Price is what a model costs, in US dollars per million tokens of each kind
// that Usage counts. Usage.InputTokens are the input tokens not read from
// the cache; reasoning tokens are billed as output and are counted in
// OutputTokens by the vendors.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead,omitempty"`
	CacheWrite float64 `json:"cacheWrite,omitempty"`
}

// Cost returns what u costs at p, in US dollars.
func (p Price) Cost(u Usage) float64 {
	c := float64(u.InputTokens)*p.Input + float64(u.OutputTokens)*p.Output
	if u.CacheReadTokens != nil {
		c += float64(*u.CacheReadTokens) * p.CacheRead
	}
	if u.CacheWriteTokens != nil {
		c += float64(*u.CacheWriteTokens) * p.CacheWrite
	}
	return c / 1e6
}

func (p Price) validate(model string) error {
	for _, v := range []float64{p.Input, p.Output, p.CacheRead, p.CacheWrite} {
		if v < 0 || v != v {
			return fmt.Errorf("price of %q: every price must be a non-negative number of dollars per million tokens", model)
		}
	}
	return nil
}

// PricesAsOf is the date of the built-in price table: the vendors' list
// prices for their public APIs as drover's authors last checked them.
// Prices change; a run that depends on them (a budget) should pass its own
// (Options.Prices, DROVER_PRICES).
const PricesAsOf = "2025-11"

// PricesEnv names an environment variable holding the path of a JSON file
// of prices ({"model or prefix": {"input":…, "output":…, "cacheRead":…,
// "cacheWrite":…}}), read by the engine at the start of each run. Its
// entries win over the built-in table; Options.Prices win over both.
const PricesEnv = "DROVER_PRICES"

// builtinPrices maps a model name, or the prefix of a family of model
// names, to its list price (USD per million tokens) as of PricesAsOf.
var builtinPrices = map[string]Price{
	// Anthropic (cache write: 5-minute writes).
	"claude-opus-4":     {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-1":   {Input: 15, Output: 75, CacheRead: 1.5, CacheWrite: 18.75},
	"claude-opus-4-5":   {Input: 5, Output: 25, CacheRead: 0.5, CacheWrite: 6.25},
	"claude-sonnet-4":   {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-sonnet-4-5": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-haiku-4-5":  {Input: 1, Output: 5, CacheRead: 0.1, CacheWrite: 1.25},
	"claude-3-7-sonnet": {Input: 3, Output: 15, CacheRead: 0.3, CacheWrite: 3.75},
	"claude-3-5-haiku":  {Input: 0.8, Output: 4, CacheRead: 0.08, CacheWrite: 1},
	// OpenAI.
	"gpt-5":         {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-codex":   {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5.1":       {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5.1-codex": {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gpt-5-mini":    {Input: 0.25, Output: 2, CacheRead: 0.025},
	"gpt-5-nano":    {Input: 0.05, Output: 0.4, CacheRead: 0.005},
	"gpt-4.1":       {Input: 2, Output: 8, CacheRead: 0.5},
	"gpt-4.1-mini":  {Input: 0.4, Output: 1.6, CacheRead: 0.1},
	"gpt-4o":        {Input: 2.5, Output: 10, CacheRead: 1.25},
	"gpt-4o-mini":   {Input: 0.15, Output: 0.6, CacheRead: 0.075},
	"o3":            {Input: 2, Output: 8, CacheRead: 0.5},
	"o4-mini":       {Input: 1.1, Output: 4.4, CacheRead: 0.275},
	// Google (prompts up to 200k tokens).
	"gemini-2.5-pro":        {Input: 1.25, Output: 10, CacheRead: 0.125},
	"gemini-2.5-flash":      {Input: 0.3, Output: 2.5, CacheRead: 0.03},
	"gemini-2.5-flash-lite": {Input: 0.1, Output: 0.4, CacheRead: 0.01},
	"gemini-2.0-flash":      {Input: 0.1, Output: 0.4, CacheRead: 0.025},
}

// BuiltinPrices returns a copy of the built-in price table (see PricesAsOf).
func BuiltinPrices() map[string]Price { return maps.Clone(builtinPrices) }

// LoadPrices reads a JSON price file: an object mapping a model name or
// prefix to a Price. An unknown field, a negative price or an unreadable
// file is an error naming the file.
func LoadPrices(path string) (map[string]Price, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read prices: %w", err)
	}
	var m map[string]Price
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("prices file %s: %w (want {\"model\": {\"input\": 1.25, \"output\": 10, \"cacheRead\": 0.125}} in USD per million tokens)", path, err)
	}
	for k, p := range m {
		if err := p.validate(k); err != nil {
			return nil, fmt.Errorf("prices file %s: %w", path, err)
		}
	}
	return m, nil
}

// LookupPrice finds model's price in the tables, in order (the first table
// with a match wins): an entry named exactly as the model, else the
// longest entry that is a prefix of it ending where a "-", "@" or ":"
// follows ("gpt-5" prices "gpt-5-2025-08-07" but not "gpt-5.5" or
// "gpt-5-mini" when that has its own entry). A provider prefix ("openai/",
// "models/") is ignored, and names compare case-insensitively.
func LookupPrice(model string, tables ...map[string]Price) (Price, bool) {
	name := strings.ToLower(model)
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	if name == "" {
		return Price{}, false
	}
	for _, t := range tables {
		best, found := "", false
		for _, k := range slices.Sorted(maps.Keys(t)) {
			key := strings.ToLower(k)
			if i := strings.LastIndexByte(key, '/'); i >= 0 {
				key = key[i+1:]
			}
			if key == name {
				return t[k], true
			}
			if strings.HasPrefix(name, key) && strings.ContainsRune("-@:", rune(name[len(key)])) && len(k) > len(best) {
				best, found = k, true
			}
		}
		if found {
			return t[best], true
		}
	}
	return Price{}, false
}
