package runs

import (
	"sync"
	"time"

	"github.com/drover-run/drover/store"
)

// tailMax is how many of its latest durable events an active run keeps
// for its followers; it holds between tailMax and tailHold. A follower
// writing to a pipe falls a few hundred events behind a busy run at times
// (with 256 it read a tenth of a claude run back from SQLite), and a
// batch the ledger makes durable at once is up to 1024 events; ~1 MB of
// events is what a thousand cost.
const tailMax = 1024

// tailHold is the most the tail holds before it forgets its oldest:
// twice tailMax, so that forgetting is not per event. (A quarter more
// than tailMax saved 0.5–1 MB of a 100k-event run but sent its follower
// back to SQLite at times in a 1M one: +1 MB and +8–25 % CPU.)
const tailHold = 2 * tailMax

// tailAge is how long an event stays in the tail. A follower keeping up
// is milliseconds behind; what the tail holds longer only keeps memory
// (and the slabs its events point into) alive: 200 slow runs held
// ~20 MB more with a count alone.
const tailAge = time.Second

// tail is an active run's latest durable events, exactly as the ledger has
// them (the same JSON bytes, which are never written again). Followers of
// a run this process owns read them here rather than query the ledger for
// what it was just given: reading each event back from SQLite was a
// tenth of a recorded run's CPU. A follower that is further
// behind than the tail reaches reads the ledger, as does one of a run that
// has ended or that another process owns.
type tail struct {
	mu   sync.Mutex
	evs  []store.Event // evs[head:]: consecutive seqs, oldest first
	at   []int64       // when each of evs was added, monotonic ns since base
	head int           // evs[:head] are forgotten, cleared, awaiting compaction
	base time.Time
	last int64 // the last durable seq
}

// add appends ev, the run's next durable event, and forgets events older
// than tailAge or past tailHold. Forgotten slots are reclaimed once
// they are half the slice, so each add costs O(1) amortised.
func (t *tail) add(ev store.Event) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.base.IsZero() {
		t.base = time.Now()
	}
	now := int64(time.Since(t.base))
	for t.head < len(t.evs) && (now-t.at[t.head] > int64(tailAge) || len(t.evs)-t.head >= tailHold) {
		t.evs[t.head] = store.Event{}
		t.head++
	}
	if t.head > 0 && t.head >= len(t.evs)/2 {
		n := copy(t.evs, t.evs[t.head:])
		clear(t.evs[n:])
		t.evs = t.evs[:n]
		t.at = t.at[:copy(t.at, t.at[t.head:])]
		t.head = 0
	}
	t.evs = append(t.evs, ev)
	t.at = append(t.at, now)
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
	held := t.evs[t.head:]
	if len(held) == 0 || afterSeq+1 < held[0].Seq {
		return nil, false
	}
	i := int(afterSeq + 1 - held[0].Seq)
	return append([]store.Event(nil), held[i:min(len(held), i+limit)]...), true
}
