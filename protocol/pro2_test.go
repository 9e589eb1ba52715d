package protocol_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/protocol"
)

// PRO-2: a subscriber that does not read gets "lagged" and then every
// event from the ledger, in order, with no gap and no duplicate; the run
// meanwhile finishes without waiting for it.
func TestPRO2_SlowSubscriberLaggedThenCatchesUp(t *testing.T) {
	f := newFixture(t, protocol.Config{QueueSize: 64})
	w := f.dial(t)
	var sub protocol.SubscribeResult
	w.call("1", `{"id":1,"op":"subscribe","all":true}`, &sub)

	const n = 3000
	start := time.Now()
	id, err := f.start(runsReq("quick", "3000"))
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads the connection while the run goes: it must end anyway.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if _, err := f.sup.Await(ctx, id); err != nil {
		t.Fatalf("the run was held up by a subscriber that does not read: %v", err)
	}
	t.Logf("run of %d events ended in %s with the subscriber stalled", n+1, time.Since(start))

	var last, cursor int64
	lagged := 0
	for last < n+1 {
		l := w.next()
		if l.Subscription != sub.Subscription || l.Event == nil {
			t.Fatalf("unexpected line %s", l.raw)
		}
		if _, ok := isSynced(l); ok {
			continue
		}
		if lg, ok := isLagged(l); ok {
			lagged++
			if lg.AfterCursor != cursor || lg.RunID != "" {
				t.Fatalf("lagged %+v after cursor %d", lg, cursor)
			}
			continue
		}
		if l.Cursor <= cursor {
			t.Fatalf("line %s: cursor not after %d", l.raw, cursor)
		}
		cursor = l.Cursor
		ev := ues(t, l)
		if ev.RunID != id || ev.Seq != last+1 {
			t.Fatalf("seq %d of %s after %d: a gap or a duplicate", ev.Seq, ev.RunID, last)
		}
		last = ev.Seq
		if last == n+1 && ev.Type != drover.TypeDone {
			t.Fatalf("last event %s", ev.Type)
		}
	}
	if lagged == 0 {
		t.Fatal("the stalled subscriber was never told it lagged")
	}
	t.Logf("%d lagged notices", lagged)
	w.call("2", `{"id":2,"op":"list"}`, nil) // the connection is fine
}

// PRO-2: two subscriptions on one slow connection each catch up on their
// own run, and responses still get through.
func TestPRO2_ManyRunsSlowConnection(t *testing.T) {
	f := newFixture(t, protocol.Config{QueueSize: 16})
	w := f.dial(t)
	a, _ := f.start(runsReq("quick", "500"))
	b, _ := f.start(runsReq("quick", "700"))
	w.call("1", `{"id":1,"op":"subscribe","runs":["`+a+`"]}`, nil)
	w.call("2", `{"id":2,"op":"subscribe","runs":["`+b+`"]}`, nil)
	await(t, f.sup, a, b)
	want := map[string]int64{a: 501, b: 701}
	seqs := map[string]int64{}
	for seqs[a] < want[a] || seqs[b] < want[b] {
		l := w.nextEvent()
		if _, ok := isLagged(l); ok {
			continue
		}
		ev := ues(t, l)
		if ev.Seq != seqs[ev.RunID]+1 {
			t.Fatalf("run %s: seq %d after %d", ev.RunID, ev.Seq, seqs[ev.RunID])
		}
		seqs[ev.RunID] = ev.Seq
	}
}
