package server_test

import (
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// PRO-3, CTL-1, CTL-3: respond, steer and interrupt over HTTP, with the
// protocol's codes as HTTP statuses (404, 400, 409).
func TestPRO3_RespondSteerInterrupt(t *testing.T) {
	f := newFixture(t, server.Config{})
	var run runs.Started
	if code := f.do(t, "POST", "/v1/runs", `{"agent":"asker","prompt":"build","options":{"approvalTimeout":"1m"}}`, &run); code != 201 {
		t.Fatalf("run: %d", code)
	}
	id, base := run.RunID, "/v1/runs/"+run.RunID
	var got api.GetResult
	for deadline := time.Now().Add(10 * time.Second); len(got.Pending) == 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no pending request")
		}
		f.do(t, "GET", base, "", &got)
	}
	f.fail(t, "POST", base+"/respond", `{"requestId":"nope","behavior":"allow"}`, 404, api.CodeNotFound)
	f.fail(t, "POST", "/v1/runs/run_nope/respond", `{"requestId":"q1","behavior":"allow"}`, 404, api.CodeNotFound)
	f.fail(t, "POST", base+"/respond", `{"requestId":"q1","behavior":"sure"}`, 400, api.CodeValidation)
	f.fail(t, "POST", base+"/respond", `{"requestId":"q1","colour":"red"}`, 400, api.CodeInvalidRequest)
	f.fail(t, "POST", base+"/steer", `{}`, 400, api.CodeValidation)
	var empty map[string]any
	if code := f.do(t, "POST", base+"/respond", `{"requestId":"q1","behavior":"allow","always":true}`, &empty); code != 200 {
		t.Fatalf("respond: %d", code)
	}
	f.fail(t, "POST", base+"/respond", `{"requestId":"q1","behavior":"deny"}`, 409, api.CodeConflict)
	if code := f.do(t, "POST", base+"/steer", `{"message":"also lint","by":"alice"}`, &empty); code != 200 {
		t.Fatalf("steer: %d", code)
	}
	if code := f.do(t, "POST", base+"/interrupt", "", &empty); code != 200 {
		t.Fatalf("interrupt: %d", code)
	}
	r := f.await(t, id)[0]
	if r.Status != store.StatusFailed || r.Error != store.ReasonInterrupted || r.ResumeToken != "tok" {
		t.Fatalf("run %+v", r)
	}
	got = api.GetResult{}
	f.do(t, "GET", base, "", &got)
	if p := got.ToolCalls[0].Permission; p == nil || p.Detail != "http" || !p.Always {
		t.Fatalf("permission %+v: want the http client's always answer", p)
	}
	f.fail(t, "POST", base+"/interrupt", "", 409, api.CodeConflict)
}
