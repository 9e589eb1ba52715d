package sqlite_test

import (
	"database/sql"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// LED-3: a run's messages and tool calls are visible to plain SQL, in the
// views run_messages and run_tool_calls, the same as Store.Messages and
// Store.ToolCalls return them, whether kept as given or by reference.
func TestLED3_TurnRecordViews(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	createRuns(t, s, "r1")
	t0 := time.Unix(1700000000, 0).UTC()
	ev := func(seq int64, typ drover.EventType, payload string) store.Event {
		return store.Event{RunID: "r1", Seq: seq, Type: typ, Time: t0.Add(time.Duration(seq) * time.Second),
			JSON: json.RawMessage(`{"type":"` + string(typ) + `","agent":"claude","timestamp":1,"sessionId":"s","payload":` + payload + `,"runId":"r1","seq":1}`)}
	}
	if err := s.AppendEvents(ctx, []store.Event{
		ev(1, drover.TypeText, `{"content":"Creating the file."}`),
		ev(2, drover.TypeToolUse, `{"toolName":"Bash","toolUseId":"tu-1","input":{"command":"ls"}}`),
		ev(3, drover.TypeToolResult, `{"toolUseId":"tu-1","status":"success","output":"a.go\n"}`),
		ev(4, drover.TypeSteer, `{"message":"and b.go"}`),
		ev(5, drover.TypeText, `{"content":"Done ✓"}`),
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, store.Finish{RunID: "r1", Status: store.StatusCompleted, DoneStatus: drover.StatusSuccess,
		Messages: []store.Message{
			{Index: 0, Role: "user", Content: "list the files"},
			{Index: 1, Seq: 1}, {Index: 2, Seq: 3, Span: 2}, // messages 2 and 3: events 3 and 4
			{Index: 4, Role: "assistant", Content: "given, not referenced"},
			{Index: 5, Seq: 5},
		},
		ToolCalls: []store.ToolCall{
			{Seq: 2, ResultSeq: 3},
			{ID: "tu-0", Name: "Task", Input: json.RawMessage(`{"a":1}`), StartedAt: t0, Status: drover.ToolSuccess, Output: "ok"},
			{ResultSeq: 3, ID: "tu-9", Name: "Read", StartedAt: t0.Add(time.Second)},
			{Seq: 2, Status: drover.ToolDenied},
		},
	}); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)

	want, err := s.Messages(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	rows, err := db.Query(`SELECT idx, role, content, tool_use_id, seq FROM run_messages WHERE run_id = 'r1' ORDER BY idx`)
	if err != nil {
		t.Fatal(err)
	}
	var got []store.Message
	for rows.Next() {
		m := store.Message{RunID: "r1"}
		var seq sql.NullInt64
		if err := rows.Scan(&m.Index, &m.Role, &m.Content, &m.ToolUseID, &seq); err != nil {
			t.Fatal(err)
		}
		m.Seq = seq.Int64
		got = append(got, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(want) != 6 {
		t.Fatalf("Store.Messages returned %d messages, want 6", len(want))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run_messages (-Store.Messages +view):\n%s", diff)
	}

	wantCalls, err := s.ToolCalls(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	rows, err = db.Query(`SELECT id, name, input, status, output, started_at, ended_at, seq, result_seq
		FROM run_tool_calls WHERE run_id = 'r1' ORDER BY ord`)
	if err != nil {
		t.Fatal(err)
	}
	var gotCalls []store.ToolCall
	for rows.Next() {
		c := store.ToolCall{RunID: "r1"}
		var input sql.NullString
		var status string
		var started, ended, seq, resultSeq sql.NullInt64
		if err := rows.Scan(&c.ID, &c.Name, &input, &status, &c.Output, &started, &ended, &seq, &resultSeq); err != nil {
			t.Fatal(err)
		}
		if input.Valid {
			c.Input = json.RawMessage(input.String)
		}
		c.Status = drover.ToolStatus(status)
		if started.Valid {
			c.StartedAt = time.Unix(0, started.Int64).UTC()
		}
		if ended.Valid {
			c.EndedAt = time.Unix(0, ended.Int64).UTC()
		}
		c.Seq, c.ResultSeq = seq.Int64, resultSeq.Int64
		gotCalls = append(gotCalls, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(wantCalls) != 4 {
		t.Fatalf("Store.ToolCalls returned %d calls, want 4", len(wantCalls))
	}
	if diff := cmp.Diff(wantCalls, gotCalls); diff != "" {
		t.Errorf("run_tool_calls (-Store.ToolCalls +view):\n%s", diff)
	}
}

// WS-2, WS-3: a run's change — its files, patch, check and decisions — is
// readable with plain SQL, the same as Store.GetChange returns it.
func TestWS2_ChangeInPlainSQL(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	createRuns(t, s, "r1")
	c := &store.Change{RunID: "r1", Repo: "/src/app", Base: "3f786850e387550fdab836ed7e6dc881de23001b",
		Files: []store.ChangeFile{
			{Path: "main.go", Kind: "modified", Added: 2, Removed: 1},
			{Path: "docs/guide.md", From: "docs/old.md", Kind: "renamed"},
			{Path: "logo.png", Kind: "added", Binary: true},
		},
		Patch: "diff --git a/main.go b/main.go\n--- a/main.go\n+++ b/main.go\n@@ -1 +1,2 @@\n-caf\xe9\n+café\n+ok\n",
		Check: &store.ChangeCheck{Command: "go test ./...", Passed: false, ExitCode: 2, DurationMs: 30},
		State: store.ChangePending}
	if err := s.RecordChange(ctx, c); err != nil {
		t.Fatal(err)
	}
	for _, d := range []store.ChangeDecision{
		{Action: store.ChangeRevised, By: "drover revise", Detail: "r2"},
		{Action: store.ChangeApplied, By: "http"},
	} {
		if err := s.DecideChange(ctx, "r1", d); err != nil {
			t.Fatal(err)
		}
	}
	want, err := s.GetChange(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)

	rows, err := db.Query(`SELECT f.value ->> 'path', COALESCE(f.value ->> 'from', ''), f.value ->> 'kind',
			f.value ->> 'added', f.value ->> 'removed', COALESCE(f.value ->> 'binary', 0)
		FROM changes c, json_each(c.files) f WHERE c.run_id = 'r1' ORDER BY f.key`)
	if err != nil {
		t.Fatal(err)
	}
	var files []store.ChangeFile
	for rows.Next() {
		var f store.ChangeFile
		if err := rows.Scan(&f.Path, &f.From, &f.Kind, &f.Added, &f.Removed, &f.Binary); err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Files, files); diff != "" {
		t.Errorf("files (-Store.GetChange +SQL):\n%s", diff)
	}

	rows, err = db.Query(`SELECT d.action, d.decided_by, d.at, d.detail
		FROM change_decisions d JOIN changes c USING (run_id) WHERE c.run_id = 'r1' ORDER BY d.n`)
	if err != nil {
		t.Fatal(err)
	}
	var ds []store.ChangeDecision
	for rows.Next() {
		var d store.ChangeDecision
		var at int64
		if err := rows.Scan(&d.Action, &d.By, &at, &d.Detail); err != nil {
			t.Fatal(err)
		}
		d.At = time.Unix(0, at).UTC()
		ds = append(ds, d)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Decisions, ds); diff != "" {
		t.Errorf("decisions (-Store.GetChange +SQL):\n%s", diff)
	}

	var patch, state string
	var exit int
	var passed bool
	if err := db.QueryRow(`SELECT patch, state, check_result ->> 'exitCode', check_result ->> 'passed'
		FROM changes WHERE run_id = 'r1'`).Scan(&patch, &state, &exit, &passed); err != nil {
		t.Fatal(err)
	}
	if patch != want.Patch || state != string(want.State) || exit != want.Check.ExitCode || passed != want.Check.Passed {
		t.Errorf("SQL read patch %q, state %s, check exit %d passed %v; Store.GetChange %q, %s, %+v",
			patch, state, exit, passed, want.Patch, want.State, want.Check)
	}
}
