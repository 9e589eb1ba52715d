package sqlite_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// compactEvent is a claude-code:compact event as drover records it: the
// native compact_boundary line of claude 2.1.330 as its payload.
func compactEvent(run string, seq int64, trigger string, before, after int) store.Event {
	js, _ := json.Marshal(map[string]any{"type": "claude-code:compact", "agent": "claude-code", "timestamp": 1795587992997,
		"sessionId": "sess-1", "runId": run, "seq": seq,
		"payload": map[string]any{"type": "system", "subtype": "compact_boundary",
			"compact_metadata": map[string]any{"trigger": trigger, "pre_tokens": before, "post_tokens": after}}})
	return store.Event{RunID: run, Seq: seq, Type: "claude-code:compact", JSON: js, Time: time.UnixMilli(1795587992997)}
}

// UES-5, FAIL-1: every compaction a vendor reported is a row of the
// compactions view, by session: when, trigger, tokens before and after.
func TestUES5_CompactionsRecorded(t *testing.T) {
	s, path := openTemp(t)
	createRuns(t, s, "r1")
	evs := []store.Event{testEvent("r1", 1), compactEvent("r1", 2, "auto", 250000, 4000), testEvent("r1", 3), compactEvent("r1", 4, "manual", 15, 434)}
	if err := s.AppendEvents(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	rows, err := rawDB(t, path).QueryContext(t.Context(), `SELECT session_id, run_id, seq, agent, at_ms, trigger, tokens_before, tokens_after FROM compactions ORDER BY seq`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type row struct {
		sess, run     string
		seq           int64
		agent         string
		at            int64
		trigger       string
		before, after int64
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.sess, &r.run, &r.seq, &r.agent, &r.at, &r.trigger, &r.before, &r.after); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := []row{{"sess-1", "r1", 2, "claude-code", 1795587992997, "auto", 250000, 4000}, {"sess-1", "r1", 4, "claude-code", 1795587992997, "manual", 15, 434}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("compactions %+v, want %+v", got, want)
	}
}
