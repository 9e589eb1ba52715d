package postgres_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// LED-3: a run's messages and tool calls are visible to plain SQL, in the
// views run_messages and run_tool_calls, the same as Store.Messages and
// Store.ToolCalls return them, whether kept as given or by reference.
func TestLED3_TurnRecordViews(t *testing.T) {
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	s, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CreateRun(ctx, &store.Run{ID: "r1", Agent: "claude", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
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
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)

	want, err := s.Messages(ctx, "r1")
	if err != nil {
		t.Fatal(err)
	}
	rows, _ := conn.Query(ctx, `SELECT idx, role, content, tool_use_id, seq FROM run_messages WHERE run_id = 'r1' ORDER BY idx`)
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.Message, error) {
		m := store.Message{RunID: "r1"}
		var seq *int64
		err := r.Scan(&m.Index, &m.Role, &m.Content, &m.ToolUseID, &seq)
		if seq != nil {
			m.Seq = *seq
		}
		return m, err
	})
	if err != nil {
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
	rows, _ = conn.Query(ctx, `SELECT id, name, input, status, output, started_at, ended_at, seq, result_seq
		FROM run_tool_calls WHERE run_id = 'r1' ORDER BY ord`)
	gotCalls, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ToolCall, error) {
		c := store.ToolCall{RunID: "r1"}
		var input *string
		var status string
		var started, ended *time.Time
		var seq, resultSeq *int64
		if err := r.Scan(&c.ID, &c.Name, &input, &status, &c.Output, &started, &ended, &seq, &resultSeq); err != nil {
			return c, err
		}
		if input != nil {
			c.Input = json.RawMessage(*input)
		}
		c.Status = drover.ToolStatus(status)
		if started != nil {
			c.StartedAt = started.UTC()
		}
		if ended != nil {
			c.EndedAt = ended.UTC()
		}
		if seq != nil {
			c.Seq = *seq
		}
		if resultSeq != nil {
			c.ResultSeq = *resultSeq
		}
		return c, nil
	})
	if err != nil {
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
	ctx := t.Context()
	url := pgtest.NewDatabase(t)
	s := open(t, url)
	mkRuns(t, s, "r1")
	c := &store.Change{RunID: "r1", Repo: "/src/app", Base: "3f786850e387550fdab836ed7e6dc881de23001b",
		Files: []store.ChangeFile{
			{Path: "main.go", Kind: "modified", Added: 2, Removed: 1},
			{Path: "docs/guide.md", From: "docs/old.md", Kind: "renamed"},
			{Path: "logo.png", Kind: "added", Binary: true},
		},
		Patch: "diff --git a/main.go b/main.go\n--- a/main.go\n+++ b/main.go\n@@ -1 +1,2 @@\n-cafe\n+café\n+ok\n",
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
	db := conn(t, url)

	rows, _ := db.Query(ctx, `SELECT f ->> 'path', COALESCE(f ->> 'from', ''), f ->> 'kind',
			(f ->> 'added')::int, (f ->> 'removed')::int, COALESCE((f ->> 'binary')::boolean, false)
		FROM changes c, jsonb_array_elements(c.files) WITH ORDINALITY AS e (f, i) WHERE c.run_id = 'r1' ORDER BY i`)
	files, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ChangeFile, error) {
		var f store.ChangeFile
		err := r.Scan(&f.Path, &f.From, &f.Kind, &f.Added, &f.Removed, &f.Binary)
		return f, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Files, files); diff != "" {
		t.Errorf("files (-Store.GetChange +SQL):\n%s", diff)
	}

	rows, _ = db.Query(ctx, `SELECT d.action, d.decided_by, d.at, d.detail
		FROM change_decisions d JOIN changes c USING (run_id) WHERE c.run_id = 'r1' ORDER BY d.n`)
	ds, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.ChangeDecision, error) {
		var d store.ChangeDecision
		err := r.Scan(&d.Action, &d.By, &d.At, &d.Detail)
		d.At = d.At.UTC()
		return d, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Decisions, ds); diff != "" {
		t.Errorf("decisions (-Store.GetChange +SQL):\n%s", diff)
	}

	var patch, state string
	var exit int
	var passed bool
	if err := db.QueryRow(ctx, `SELECT convert_from(patch, 'UTF8'), state, (check_result ->> 'exitCode')::int,
		(check_result ->> 'passed')::boolean FROM changes WHERE run_id = 'r1'`).Scan(&patch, &state, &exit, &passed); err != nil {
		t.Fatal(err)
	}
	if patch != want.Patch || state != string(want.State) || exit != want.Check.ExitCode || passed != want.Check.Passed {
		t.Errorf("SQL read patch %q, state %s, check exit %d passed %v; Store.GetChange %q, %s, %+v",
			patch, state, exit, passed, want.Patch, want.State, want.Check)
	}
}
