package runner

import (
	"encoding/json"
	"sync"
)

// A Warmer is a Translator that names the types it decodes its lines
// into, so that the runner can warm them. jsonv2 builds its machinery the
// first time it decodes and a type's decoder the first time it meets the
// type: ~0.8 ms for claude's first line, all of it on the way from the
// vendor's first line to drover's first event. The runner builds both
// once the vendor has started, while it starts up, before the first line.
type Warmer interface {
	// Decodes returns a new value of each type, by pointer (new(line)):
	// the runner decodes into them.
	Decodes() []any
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

// warm builds jsonv2's machinery and the decoders of the types the
// Translator decodes into, if it is a Warmer. jsonv2 keeps what it builds
// for the process: a type met before costs a decode of "{}" again, a
// microsecond, off the way to the first event.
func (a *attemptRun) warm() {
	w, ok := a.tr.(Warmer)
	if !ok {
		return
	}
	warmDecoding()
	for _, v := range w.Decodes() {
		_ = Unmarshal([]byte(`{}`), v)
	}
}
