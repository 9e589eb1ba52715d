package runs

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// The slab encoder gives json.Marshal's bytes, and never changes bytes it
// has returned, across slab boundaries and for values larger than a slab.
func TestSlabEncoder(t *testing.T) {
	var e slabEncoder
	type out struct{ got, want []byte }
	var outs []out
	for i := range 2000 {
		content := strings.Repeat("é<&>\"", i%50)
		if i%700 == 0 {
			content = strings.Repeat("x", slabSize+i)
		}
		ev := drover.Event{Type: drover.TypeText, Agent: "a", Seq: int64(i), Payload: drover.TextPayload{Content: content}}
		got, err := e.encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out{got, want})
	}
	for i, o := range outs {
		if !bytes.Equal(o.got, o.want) {
			t.Fatalf("event %d: got %.80s, want %.80s", i, o.got, o.want)
		}
	}
	if _, err := e.encode(drover.Event{Payload: func() {}}); err == nil {
		t.Error("encoding a func succeeded")
	}
}
