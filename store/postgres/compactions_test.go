package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// UES-5, FAIL-1: every compaction a vendor reported is a row of the
// compactions view, by session, as on SQLite.
func TestUES5_CompactionsRecorded(t *testing.T) {
	u := pgtest.NewDatabase(t)
	s := open(t, u)
	mkRuns(t, s, "r1")
	js, _ := json.Marshal(map[string]any{"type": "claude-code:compact", "agent": "claude-code", "timestamp": 1795587992997,
		"sessionId": "sess-1", "runId": "r1", "seq": 2,
		"payload": map[string]any{"type": "system", "subtype": "compact_boundary",
			"compact_metadata": map[string]any{"trigger": "manual", "pre_tokens": 15, "post_tokens": 434}}})
	evs := []store.Event{ev("r1", 1), {RunID: "r1", Seq: 2, Type: "claude-code:compact", JSON: js, Time: time.UnixMilli(1795587992997)}, ev("r1", 3)}
	if err := s.AppendEvents(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	var (
		sess, run, agent, trigger string
		seq, at, before, after    int64
	)
	rows, err := conn(t, u).Query(t.Context(), `SELECT session_id, run_id, seq, agent, at_ms, trigger, tokens_before, tokens_after FROM compactions`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		n++
		if err := rows.Scan(&sess, &run, &seq, &agent, &at, &trigger, &before, &after); err != nil {
			t.Fatal(err)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n != 1 || sess != "sess-1" || run != "r1" || seq != 2 || agent != "claude-code" || at != 1795587992997 || trigger != "manual" || before != 15 || after != 434 {
		t.Errorf("%d rows; last: %s %s %d %s %d %s %d %d", n, sess, run, seq, agent, at, trigger, before, after)
	}
}
