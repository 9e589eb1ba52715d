package runs

import (
	"encoding/json"

	"github.com/drover-run/drover"
)

// slabSize is the size of the buffers a slabEncoder carves event JSON from.
const slabSize = 64 << 10

// slabEncoder encodes events to JSON exactly as json.Marshal does, but
// carves the results out of shared 64 KiB slabs instead of allocating
// each: every allocation brings the next garbage collection nearer, and
// collections slow the agent's event path. A result is never written again
// once returned (a full slab is replaced, not reused), so it may be handed
// to the ledger.
type slabEncoder struct {
	slab []byte
	last int // where the last Write started in slab
	enc  *json.Encoder
	ev   drover.Event // the event being encoded: a pointer to it is no allocation
}

func (e *slabEncoder) encode(ev drover.Event) ([]byte, error) {
	if e.enc == nil {
		e.enc = json.NewEncoder(e)
	}
	e.ev = ev
	err := e.enc.Encode(&e.ev)
	e.ev = drover.Event{}
	if err != nil {
		return nil, err
	}
	// Encode writes once, the value and a newline.
	data := e.slab[e.last : len(e.slab)-1]
	return data[:len(data):len(data)], nil
}

// Write appends p to the current slab, starting a new slab when p does not
// fit (a value larger than a slab gets a slab of its own).
func (e *slabEncoder) Write(p []byte) (int, error) {
	if len(e.slab)+len(p) > cap(e.slab) {
		e.slab = make([]byte, 0, max(slabSize, len(p)))
	}
	e.last = len(e.slab)
	e.slab = append(e.slab, p...)
	return len(p), nil
}
