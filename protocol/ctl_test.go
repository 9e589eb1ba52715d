package protocol_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
)

// PRO-1, CTL-1, CTL-3: respond, steer and interrupt by run id; get shows
// the open requests; every refusal has its code.
func TestPRO1_RespondSteerInterrupt(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	var run runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"asker","prompt":"build","options":{"approvalTimeout":"1m"}}`, &run)
	id := run.RunID
	var got api.GetResult
	for deadline := time.Now().Add(10 * time.Second); len(got.Pending) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pending request")
		}
		w.call("2", `{"id":2,"op":"get","runId":"`+id+`"}`, &got)
	}
	if p := got.Pending[0]; p.RequestID != "q1" || p.ToolName != "Bash" || p.Deadline == 0 {
		t.Fatalf("pending %+v", p)
	}
	for i, c := range []struct{ req, code string }{
		{`"op":"respond","runId":"` + id + `","requestId":"nope","behavior":"allow"`, api.CodeNotFound},
		{`"op":"respond","runId":"run_nope","requestId":"q1","behavior":"allow"`, api.CodeNotFound},
		{`"op":"respond","runId":"` + id + `","requestId":"q1","behavior":"perhaps"`, api.CodeValidation},
		{`"op":"respond","runId":"` + id + `"`, api.CodeInvalidRequest},
		{`"op":"steer","runId":"` + id + `","message":""`, api.CodeValidation},
	} {
		n := fmt.Sprint(10 + i)
		if code := w.fail(n, `{"id":`+n+`,`+c.req+`}`); code != c.code {
			t.Errorf("%s: %s, want %s", c.req, code, c.code)
		}
	}
	w.call("3", `{"id":3,"op":"respond","runId":"`+id+`","requestId":"q1","behavior":"allow","message":"go ahead","by":"alice"}`, nil)
	if code := w.fail("4", `{"id":4,"op":"respond","runId":"`+id+`","requestId":"q1","behavior":"deny"}`); code != api.CodeConflict {
		t.Fatalf("second answer: %s, want CONFLICT", code)
	}
	w.call("5", `{"id":5,"op":"steer","runId":"`+id+`","message":"also lint"}`, nil)
	w.call("6", `{"id":6,"op":"interrupt","runId":"`+id+`"}`, nil)
	var aw api.RunsResult
	w.call("7", `{"id":7,"op":"await","runId":"`+id+`"}`, &aw)
	if r := aw.Runs[0]; r.DoneStatus != "interrupted" || r.ResumeToken != "tok" {
		t.Fatalf("run %+v", r)
	}
	got = api.GetResult{}
	w.call("8", `{"id":8,"op":"get","runId":"`+id+`"}`, &got)
	if len(got.ToolCalls) != 1 || got.ToolCalls[0].Permission == nil || got.ToolCalls[0].Permission.Detail != "alice" || len(got.Pending) != 0 {
		t.Fatalf("turn record %+v, pending %+v", got.ToolCalls, got.Pending)
	}
	if code := w.fail("9", `{"id":9,"op":"steer","runId":"`+id+`","message":"more"}`); code != api.CodeConflict {
		t.Fatalf("steer after the end: %s, want CONFLICT", code)
	}
}

// The Go client's Respond, Steer and Interrupt; refusals are *Error.
func TestClient_RespondSteerInterrupt(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	c, _ := f.connect(t)
	ctx := context.Background()
	run, err := c.Run(ctx, api.RunParams{Agent: "asker", Prompt: "build", Options: &drover.Options{ApprovalTimeout: time.Minute}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		got, err := c.Get(ctx, api.GetParams{RunID: run.RunID})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Pending) == 1 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := c.Respond(ctx, api.RespondParams{RunID: run.RunID, RequestID: "q1", PermissionDecision: drover.PermissionDecision{Behavior: drover.Deny}}); err != nil {
		t.Fatal(err)
	}
	var pe *api.Error
	_, err = c.Respond(ctx, api.RespondParams{RunID: run.RunID, RequestID: "q1", PermissionDecision: drover.PermissionDecision{Behavior: drover.Allow}})
	if !errors.As(err, &pe) || pe.Code != api.CodeConflict {
		t.Fatalf("second answer: %v", err)
	}
	if _, err := c.Steer(ctx, api.SteerParams{RunID: run.RunID, Message: "stop"}); err != nil {
		t.Fatal(err)
	}
	rs, err := awaitIDs(ctx, c, run.RunID)
	if err != nil || rs[0].DoneStatus != drover.StatusSuccess {
		t.Fatalf("await: %+v %v", rs, err)
	}
	_, err = c.Interrupt(ctx, api.InterruptParams{RunID: run.RunID})
	if !errors.As(err, &pe) || pe.Code != api.CodeConflict {
		t.Fatalf("interrupt after the end: %v", err)
	}
}
