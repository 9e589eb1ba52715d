package runs

import (
	"sync"

	"github.com/drover-run/drover/store"
)

// tailMax is how many of its latest durable events an active run keeps
// for its followers; it holds between tailMax and twice as many. A
// follower writing to a pipe falls a few hundred events behind a busy
// run at times (with 256 it read a tenth of a claude run back from
// SQLite); ~1 MB of events is what a thousand cost.
const tailMax = 1024

// tail is an active run's latest durable events, exactly as the ledger has
// them (the same JSON bytes, which are never written again). Followers of
// a run this process owns read them here rather than query the ledger for
// what it was just given: reading each event back from SQLite was a
// tenth of a recorded run's CPU (issue 12). A follower that is further
// behind than the tail reaches reads the ledger, as does one of a run that
// has ended or that another process owns.
type tail struct {
	mu   sync.Mutex
	evs  []store.Event // consecutive seqs, oldest first
	last int64         // the last durable seq
}

// add appends ev, the run's next durable event.
func (t *tail) add(ev store.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.evs) >= 2*tailMax {
		n := copy(t.evs, t.evs[len(t.evs)-tailMax:])
		clear(t.evs[n:])
		t.evs = t.evs[:n]
	}
	t.evs = append(t.evs, ev)
	t.last = ev.Seq
}

// after returns at most limit durable events with seq > afterSeq, in
// order; ok is false when the tail no longer holds the one after afterSeq
// (the caller reads the ledger then).
func (t *tail) after(afterSeq int64, limit int) (evs []store.Event, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if afterSeq >= t.last {
		return nil, true
	}
	if len(t.evs) == 0 || afterSeq+1 < t.evs[0].Seq {
		return nil, false
	}
	i := int(afterSeq + 1 - t.evs[0].Seq)
	return append([]store.Event(nil), t.evs[i:min(len(t.evs), i+limit)]...), true
}
