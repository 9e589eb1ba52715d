package protocol_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// PRO-1: run returns the run id at once; await, get, list and events read
// it back.
func TestPRO1_RunAwaitGetListEvents(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	var run runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"quick","prompt":"3","options":{"tier":"dry-run","idleTimeout":"1m","timeout":"30s"}}`, &run)
	if !strings.HasPrefix(run.RunID, "run_") || run.SessionID == "" {
		t.Fatalf("run result %+v", run)
	}
	var aw api.RunsResult
	w.call("2", `{"id":2,"op":"await","runId":"`+run.RunID+`"}`, &aw)
	if len(aw.Runs) != 1 || aw.Runs[0].ID != run.RunID || aw.Runs[0].Status != store.StatusCompleted || aw.Runs[0].LastSeq != 4 {
		t.Fatalf("await %+v", aw)
	}
	if aw.Runs[0].Timeout != 30*time.Second {
		t.Errorf("timeout %v, want 30s", aw.Runs[0].Timeout)
	}
	var opts drover.Options
	json.Unmarshal(aw.Runs[0].Options, &opts)
	if opts.Tier != drover.TierDryRun || opts.IdleTimeout != time.Minute {
		t.Errorf("options %+v", opts)
	}

	var get api.GetResult
	w.call(`"g"`, `{"id":"g","op":"get","runId":"`+run.RunID+`"}`, &get)
	if get.Run == nil || get.Run.ID != run.RunID || len(get.Messages) != 4 || get.Messages[0].Content != "3" {
		t.Fatalf("get %+v", get)
	}
	w.call("3", `{"id":3,"op":"get","sessionId":"`+run.SessionID+`"}`, &get)
	if get.Session == nil || len(get.Runs) != 1 {
		t.Fatalf("get session %+v", get)
	}

	var list api.RunsResult
	w.call("4", `{"id":4,"op":"list","status":["completed"],"agent":"quick"}`, &list)
	if len(list.Runs) != 1 || list.Runs[0].ID != run.RunID {
		t.Fatalf("list %+v", list)
	}
	w.call("5", `{"id":5,"op":"list","status":["running"]}`, &list)
	if len(list.Runs) != 0 {
		t.Fatalf("list running %+v", list)
	}

	var evs api.EventsResult
	w.call("6", `{"id":6,"op":"events","runId":"`+run.RunID+`","afterSeq":1,"limit":2}`, &evs)
	if len(evs.Events) != 2 || !evs.More {
		t.Fatalf("events %+v", evs)
	}
	stored, _ := f.st.Events(context.Background(), run.RunID, 1, 2)
	for i, ev := range evs.Events {
		if string(ev) != string(stored[i].JSON) {
			t.Errorf("event %d is not verbatim:\n got %s\nwant %s", i, ev, stored[i].JSON)
		}
	}
	w.call("7", `{"id":7,"op":"events","runId":"`+run.RunID+`","afterSeq":3}`, &evs)
	if len(evs.Events) != 1 || evs.More {
		t.Fatalf("events after 3 %+v", evs)
	}
}

// PRO-1: await returns a failed run's record, not an error; cancel is
// idempotent (RUN-3).
func TestPRO1_AwaitFailedAndCancel(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	var bad, hang runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"failing","prompt":"x"}`, &bad)
	w.call("2", `{"id":2,"op":"run","agent":"hang","prompt":"x"}`, &hang)
	w.call("3", `{"id":3,"op":"cancel","runId":"`+hang.RunID+`"}`, nil)
	var aw api.RunsResult
	w.call("4", `{"id":4,"op":"await","runs":["`+bad.RunID+`","`+hang.RunID+`"]}`, &aw)
	if aw.Runs[0].Status != store.StatusFailed || aw.Runs[0].Error != "model fell over" {
		t.Errorf("failing run %+v", aw.Runs[0])
	}
	if aw.Runs[1].Status != store.StatusFailed || aw.Runs[1].Error != store.ReasonCancelled {
		t.Errorf("cancelled run %+v", aw.Runs[1])
	}
	w.call("5", `{"id":5,"op":"cancel","runId":"`+hang.RunID+`"}`, nil)
	w.call("6", `{"id":6,"op":"cancel","runId":"run_unknown"}`, nil)
}

// PRO-1: awaits run concurrently: a blocked await does not hold up other
// requests, and responses carry their request's id.
func TestPRO1_ConcurrentRequests(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	var hang runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"hang","prompt":"x"}`, &hang)
	w.send(`{"id":2,"op":"await","runId":"` + hang.RunID + `"}`)
	w.call("3", `{"id":3,"op":"list"}`, nil)
	w.call("4", `{"id":4,"op":"cancel","runId":"`+hang.RunID+`"}`, nil)
	if l := w.response("2"); l.Error != nil {
		t.Fatal(l.Error)
	}
}

// PRO-1: unknown runs, sessions and subscriptions are NOT_FOUND.
func TestPRO1_NotFound(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	for i, req := range []string{
		`"op":"get","runId":"run_nope"`,
		`"op":"get","sessionId":"nope"`,
		`"op":"await","runId":"run_nope"`,
		`"op":"events","runId":"run_nope"`,
		`"op":"subscribe","runs":["run_nope"]`,
		`"op":"unsubscribe","subscription":"sub_9"`,
		`"op":"run","agent":"quick","prompt":"x","options":{"sessionId":"no-such-session"}`,
	} {
		id := fmt.Sprint(i)
		if code := w.fail(id, `{"id":`+id+`,`+req+`}`); code != api.CodeNotFound {
			t.Errorf("%s: %s, want NOT_FOUND", req, code)
		}
	}
}

// PRO-1: well-formed requests with unacceptable values are VALIDATION_ERROR.
func TestPRO1_Validation(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	for i, req := range []string{
		`"op":"run","agent":"nosuch","prompt":"x"`,
		`"op":"run","prompt":"x"`,
		`"op":"run","agent":"quick","prompt":"x","options":{"tier":"reckless"}`,
		`"op":"run","agent":"quick","prompt":"x","options":{"maxTurns":-1}`,
		`"op":"run","agent":"quick","prompt":"x","parent":"run_nope"`,
		`"op":"run","agent":"quick","prompt":"x","options":{"timeout":-5}`,
		`"op":"list","status":["sleeping"]`,
		`"op":"events","runId":"run_x","afterSeq":-1`,
	} {
		id := fmt.Sprint(i)
		if code := w.fail(id, `{"id":`+id+`,`+req+`}`); code != api.CodeValidation {
			t.Errorf("%s: %s, want VALIDATION_ERROR", req, code)
		}
	}
}

// PRO-1: every malformed or unknown request gets INVALID_REQUEST, and the
// connection stays up.
func TestPRO1_MalformedKeepsConnectionUp(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	for _, tc := range []struct{ line, id string }{
		{`garbage`, "null"},
		{`{"id":1,"op":"list"`, "null"},
		{`{"id":1,"op":"list"} trailing`, "null"},
		{`[1,2,3]`, "null"},
		{`null`, "null"},
		{`"a string"`, "null"},
		{`{"op":"list"}`, "null"},
		{`{"id":null,"op":"list"}`, "null"},
		{`{"id":{"a":1},"op":"list"}`, "null"},
		{`{"id":true,"op":"list"}`, "null"},
		{`{"id":7}`, "7"},
		{`{"id":7,"op":42}`, "7"},
		{`{"id":7,"op":""}`, "7"},
		{`{"id":"x","op":"launch"}`, `"x"`},
		{`{"id":8,"op":"respond","toolUseId":"t"}`, "8"},
		{`{"id":8,"op":"steer","message":"hi"}`, "8"},
		{`{"id":9,"op":"list","limit":"ten"}`, "9"},
		{`{"id":9,"op":"list","colour":"red"}`, "9"},
		{`{"id":9,"op":"run","agent":1,"prompt":"x"}`, "9"},
		{`{"id":9,"op":"run","agent":"quick","prompt":"x","options":{"tier":7}}`, "9"},
		{`{"id":9,"op":"run","agent":"quick","prompt":"x","options":{"frobnicate":true}}`, "9"},
		{`{"id":9,"op":"run","agent":"quick","prompt":"x","options":{"timeout":"soon"}}`, "9"},
		// Each run setting has one home, in options: top-level copies are refused.
		{`{"id":9,"op":"run","agent":"quick","prompt":"x","timeout":"30s"}`, "9"},
		{`{"id":9,"op":"run","agent":"quick","prompt":"x","session":"ses_1"}`, "9"},
		{`{"id":9,"op":"await"}`, "9"},
		{`{"id":9,"op":"await","runs":"run_x"}`, "9"},
		{`{"id":9,"op":"cancel"}`, "9"},
		{`{"id":9,"op":"get"}`, "9"},
		{`{"id":9,"op":"get","runId":"a","sessionId":"b"}`, "9"},
		{`{"id":9,"op":"events"}`, "9"},
		{`{"id":9,"op":"subscribe"}`, "9"},
		{`{"id":9,"op":"subscribe","all":true,"runs":["run_x"]}`, "9"},
		{strings.Repeat("[", 100000), "null"},
	} {
		w.send(tc.line)
		l := w.next()
		if l.Error == nil || l.Error.Code != api.CodeInvalidRequest || string(l.ID) != tc.id {
			t.Errorf("%.60s: got %s, want INVALID_REQUEST with id %s", tc.line, l.raw, tc.id)
		}
		w.call("100", `{"id":100,"op":"list"}`, nil) // still up
	}
	w.send("")
	w.send("   ")
	w.call("101", `{"id":101,"op":"list"}`, nil) // blank lines are ignored
}

// PRO-1: lines have no 64 KiB limit; a line past MaxLine gets
// INVALID_REQUEST and reading goes on.
func TestPRO1_LongLines(t *testing.T) {
	f := newFixture(t, protocol.Config{MaxLine: 1 << 20})
	w := f.dial(t)
	big := strings.Repeat("x", 300<<10)
	var run runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"quick","prompt":"`+big+`"}`, &run)
	if rs := await(t, f.sup, run.RunID); rs[0].Prompt != big {
		t.Fatal("the long prompt did not arrive whole")
	}
	w.send(`{"id":2,"op":"run","agent":"quick","prompt":"` + strings.Repeat("y", 2<<20) + `"}`)
	if l := w.next(); l.Error == nil || l.Error.Code != api.CodeInvalidRequest || string(l.ID) != "null" {
		t.Fatalf("oversize line: %.200s", l.raw)
	}
	w.call("3", `{"id":3,"op":"list"}`, nil)
}

// PRO-1: subscribe to runs replays them from afterSeq and follows them
// live, the response first; events are the stored UES JSON verbatim;
// after unsubscribe no event follows.
func TestPRO1_SubscribeRuns(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	var done, hang runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"quick","prompt":"4"}`, &done)
	await(t, f.sup, done.RunID)
	w.call("2", `{"id":2,"op":"run","agent":"hang","prompt":"x"}`, &hang)

	w.send(`{"id":3,"op":"subscribe","runs":["` + done.RunID + `"],"afterSeq":2}`)
	l := w.next()
	var sub protocol.SubscribeResult
	if string(l.ID) != "3" || json.Unmarshal(l.Result, &sub) != nil || sub.Subscription == "" {
		t.Fatalf("the subscribe response must come first, got %s", l.raw)
	}
	stored, _ := f.st.Events(context.Background(), done.RunID, 2, 0)
	for _, want := range stored {
		l := w.next()
		if l.Subscription != sub.Subscription || string(*l.Event) != string(want.JSON) {
			t.Fatalf("got %s, want event %s of %s", l.raw, want.JSON, sub.Subscription)
		}
	}

	var live protocol.SubscribeResult
	w.call("4", `{"id":4,"op":"subscribe","runs":["`+hang.RunID+`"]}`, &live)
	w.call("5", `{"id":5,"op":"unsubscribe","subscription":"`+live.Subscription+`"}`, nil)
	w.call("6", `{"id":6,"op":"cancel","runId":"`+hang.RunID+`"}`, nil)
	await(t, f.sup, hang.RunID)
	w.call("7", `{"id":7,"op":"list"}`, nil)
	for _, l := range w.events {
		if ev := ues(t, l); ev.Type == drover.TypeDone {
			t.Fatalf("an event arrived after unsubscribe: %s", l.raw)
		}
	}
	if code := w.fail("8", `{"id":8,"op":"unsubscribe","subscription":"`+live.Subscription+`"}`); code != api.CodeNotFound {
		t.Fatalf("unsubscribe twice: %s", code)
	}
}

// PRO-1: subscribe all follows runs that start later, each complete and in
// order, and live runs from their first event.
func TestPRO1_SubscribeAll(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	old, err := f.start(runsReq("quick", "1"))
	if err != nil {
		t.Fatal(err)
	}
	await(t, f.sup, old)
	live, _ := f.start(runsReq("hang", "x"))
	w := f.dial(t)
	w.call("1", `{"id":1,"op":"subscribe","all":true}`, nil)
	var a, b runs.Started
	w.call("2", `{"id":2,"op":"run","agent":"quick","prompt":"5"}`, &a)
	w.call("3", `{"id":3,"op":"run","agent":"failing","prompt":"x"}`, &b)
	w.call("4", `{"id":4,"op":"cancel","runId":"`+live+`"}`, nil)
	want := map[string]int64{a.RunID: 6, b.RunID: 2, live: 2}
	seqs := map[string]int64{}
	synced := 0
	var cursor int64
	for ended := 0; ended < len(want); {
		l := w.nextEvent()
		if sy, ok := isSynced(l); ok {
			synced++
			cursor = sy.Cursor
			continue
		}
		if l.Cursor != 0 {
			if synced == 0 || l.Cursor <= cursor {
				t.Fatalf("line %s: cursor %d before synced or not after %d", l.raw, l.Cursor, cursor)
			}
			cursor = l.Cursor
		}
		ev := ues(t, l)
		if _, ok := want[ev.RunID]; !ok {
			t.Fatalf("event of run %s, which is not live or new", ev.RunID)
		}
		if ev.Seq != seqs[ev.RunID]+1 {
			t.Fatalf("run %s: seq %d after %d", ev.RunID, ev.Seq, seqs[ev.RunID])
		}
		seqs[ev.RunID] = ev.Seq
		if ev.Type == drover.TypeDone {
			ended++
		}
	}
	for id, n := range want {
		if seqs[id] != n {
			t.Errorf("run %s: %d events, want %d", id, seqs[id], n)
		}
	}
	if synced != 1 {
		t.Errorf("%d synced notices, want 1", synced)
	}
}

// PRO-1: an all-runs subscription resumes with afterCursor: a new
// subscription from the cursor of the last line received gets every event
// recorded since, of every run, once, including runs that started and
// ended in between.
func TestPRO1_SubscribeAllResume(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	var sub protocol.SubscribeResult
	w.call("1", `{"id":1,"op":"subscribe","all":true}`, &sub)
	var a runs.Started
	w.call("2", `{"id":2,"op":"run","agent":"quick","prompt":"3"}`, &a)
	got := map[string]bool{}
	var cursor int64
	// A client resumes from the synced notice's cursor or a tailed line's:
	// events of the catch-up (the run may have started before the
	// subscription listed the live runs) carry none, so until the notice
	// it has no cursor that covers them.
	synced := false
	for len(got) < 2 || !synced {
		l := w.nextEvent()
		if sy, ok := isSynced(l); ok {
			cursor, synced = sy.Cursor, true
			continue
		}
		ev := ues(t, l)
		got[fmt.Sprintf("%s/%d", ev.RunID, ev.Seq)] = true
		if l.Cursor != 0 {
			cursor = l.Cursor
		}
	}
	w.call("3", `{"id":3,"op":"unsubscribe","subscription":"`+sub.Subscription+`"}`, nil)
	await(t, f.sup, a.RunID)
	b, _ := f.start(runsReq("quick", "1"))
	await(t, f.sup, b)

	w.events = nil // the first subscription's lines, unsubscribed
	w.call("4", fmt.Sprintf(`{"id":4,"op":"subscribe","all":true,"afterCursor":%d}`, cursor), nil)
	for len(got) < 4+2 { // a: 3 texts and done; b: 1 text and done
		l := w.nextEvent()
		if _, ok := isSynced(l); ok {
			t.Fatalf("a resumed subscription sent synced: %s", l.raw)
		}
		if l.Cursor <= cursor {
			t.Fatalf("line %s: cursor not after %d", l.raw, cursor)
		}
		cursor = l.Cursor
		ev := ues(t, l)
		k := fmt.Sprintf("%s/%d", ev.RunID, ev.Seq)
		if got[k] {
			t.Fatalf("%s delivered twice", k)
		}
		got[k] = true
	}
	for _, k := range []string{a.RunID + "/4", b + "/2"} {
		if !got[k] {
			t.Fatalf("%s missing: %v", k, got)
		}
	}
	w.send(`{"id":5,"op":"subscribe","runs":["` + b + `"],"afterCursor":3}`)
	if l := w.response("5"); l.Error == nil || l.Error.Code != api.CodeValidation {
		t.Fatalf("afterCursor without all: %s", l.raw)
	}
}

// PRO-1: at the end of input the runs this connection started are
// cancelled (no orphans), others are not, and Serve returns nil.
func TestPRO1_EndOfInputCancelsOwnRuns(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	other, _ := f.start(runsReq("hang", "x"))
	w := f.dial(t)
	var own runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"hang","prompt":"x"}`, &own)
	w.send(`{"id":2,"op":"await","runId":"` + own.RunID + `"}`)
	w.w.Close()
	if l := w.response("2"); l.Error != nil {
		t.Fatalf("the await in flight at the end of input: %s", l.raw)
	}
	if err := w.close(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	r, _ := f.st.GetRun(context.Background(), own.RunID)
	if r.Status != store.StatusFailed || r.Error != store.ReasonCancelled {
		t.Errorf("own run %+v", r)
	}
	if r, _ := f.st.GetRun(context.Background(), other); r.Status.Terminal() {
		t.Errorf("another connection's run was ended: %+v", r)
	}
}

// PRO-1: cancelling Serve's context (a signal) cancels the connection's
// runs and returns its error.
func TestPRO1_SignalCancelsRuns(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- protocol.Serve(ctx, f.srv, inR, outW)
		outW.Close()
	}()
	defer inW.Close()
	go io.WriteString(inW, `{"id":1,"op":"run","agent":"hang","prompt":"x"}`+"\n")
	w := &wire{t: t, r: newReader(outR)}
	var run runs.Started
	if l := w.next(); json.Unmarshal(l.Result, &run) != nil || run.RunID == "" {
		t.Fatalf("run: %s", l.raw)
	}
	go io.Copy(io.Discard, outR)
	cancel()
	if err := <-served; err != context.Canceled {
		t.Fatalf("Serve: %v", err)
	}
	if r := await(t, f.sup, run.RunID); r[0].Error != store.ReasonCancelled {
		t.Fatalf("run %+v", r[0])
	}
}

// PRO-1: a transport that cannot write anymore does not block the server.
func TestPRO1_BrokenOutput(t *testing.T) {
	f := newFixture(t, protocol.Config{QueueSize: 4})
	inR, inW := io.Pipe()
	served := make(chan error, 1)
	go func() { served <- protocol.Serve(context.Background(), f.srv, inR, failWriter{}) }()
	for i := range 50 {
		fmt.Fprintf(inW, `{"id":%d,"op":"list"}`+"\n", i)
	}
	inW.Close()
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve blocked on a broken output")
	}
}

type failWriter struct{}

func (failWriter) Write([]byte) (int, error) { return 0, io.ErrClosedPipe }

// MCP-1 through the protocol: get of a run with children carries the usage
// of its whole tree; a run without children carries none.
func TestMCP1_GetTreeTotal(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	parent, err := f.start(runsReq("hang", "x"))
	if err != nil {
		t.Fatal(err)
	}
	var children []string
	for range 2 {
		child := runsReq("quick", "2")
		child.ParentID = parent
		id, err := f.start(child)
		if err != nil {
			t.Fatal(err)
		}
		await(t, f.sup, id)
		children = append(children, id)
	}
	f.sup.Cancel(context.Background(), parent)
	await(t, f.sup, parent)

	w := f.dial(t)
	var get api.GetResult
	w.call("1", `{"id":1,"op":"get","runId":"`+parent+`"}`, &get)
	if len(get.Children) != 2 || get.Total == nil {
		t.Fatalf("get %+v", get)
	}
	if get.Total.Runs != 3 || get.Total.Usage.InputTokens != 6 || get.Total.Usage.OutputTokens != 4 {
		t.Errorf("total %+v, want 3 runs, 6 in, 4 out", get.Total)
	}
	get = api.GetResult{}
	w.call("2", `{"id":2,"op":"get","runId":"`+children[0]+`"}`, &get)
	if get.Run == nil || get.Total != nil {
		t.Errorf("a run without children: %+v", get)
	}
}
