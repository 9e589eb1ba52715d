package drover

import "fmt"

// Price is what a model costs, in US dollars per million tokens of each kind
// that Usage counts. Usage.InputTokens are the input tokens not read from
// the cache; reasoning tokens are billed as output and are counted in
// OutputTokens by the vendors.
type Price struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheRead  float64 `json:"cacheRead,omitempty"`
	CacheWrite float64 `json:"cacheWrite,omitempty"`
	// Source says where the price was read: the vendor's price page for
	// the built-in table's rows, anything for a price file's.
	Source string `json:"source,omitempty"`
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

// Validate checks that every price of p is a non-negative number; model
// names the entry in the error.
func (p Price) Validate(model string) error {
	for _, v := range []float64{p.Input, p.Output, p.CacheRead, p.CacheWrite} {
		if v < 0 || v != v {
			return fmt.Errorf("price of %q: every price must be a non-negative number of dollars per million tokens", model)
		}
	}
	return nil
}
