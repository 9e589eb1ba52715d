package runner

import (
	"encoding/json"
	"sync"
)

// A Warmer is a Translator with work to do once per process before it
// translates a line quickly. jsonv2 builds its machinery the first time it
// decodes and a type's decoder the first time it meets the type: ~0.8 ms
// for claude's first line, all of it on the way from the vendor's first
// line to drover's first event. The runner
// calls Warm once the vendor has started, while it starts up.
type Warmer interface {
	Warm()
}

// warmDecoding has jsonv2 decode a line of the kinds of values vendors'
// lines hold, once per process, so that its machinery is built.
var warmDecoding = sync.OnceFunc(func() {
	var v struct {
		S string          `json:"s"`
		L []string        `json:"l"`
		R json.RawMessage `json:"r"`
		M map[string]any  `json:"m"`
		P *string         `json:"p"`
		N struct {
			I int64   `json:"i"`
			F float64 `json:"f"`
			B bool    `json:"b"`
		} `json:"n"`
	}
	_ = Unmarshal([]byte(`{"s":"a\n","l":["b"],"r":{"x":[1]},"m":{"k":[true,null,"c",2.5]},"p":"d","n":{"i":1,"f":0.5,"b":true}}`), &v)
})

// WarmDecoders returns a Warm for a Translator that decodes its lines
// into the types vs point to: called any number of times, it builds
// jsonv2's machinery and the decoders of those types, once per process.
func WarmDecoders(vs ...any) func() {
	return sync.OnceFunc(func() {
		warmDecoding()
		for _, v := range vs {
			_ = Unmarshal([]byte(`{}`), v)
		}
	})
}

// warm runs the Translator's Warm, if it has one.
func (a *attemptRun) warm() {
	if w, ok := a.tr.(Warmer); ok {
		w.Warm()
	}
}
