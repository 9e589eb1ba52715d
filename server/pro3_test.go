package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// PRO-3: run, await, get, list and events over HTTP give what the
// protocol gives; events are the stored UES JSON verbatim.
func TestPRO3_RunAwaitGetListEvents(t *testing.T) {
	f := newFixture(t, server.Config{})
	id := f.start(t, "quick", "4")

	var aw api.RunsResult
	if code := f.do(t, "GET", "/v1/runs/"+id+"/await", "", &aw); code != 200 || len(aw.Runs) != 1 || aw.Runs[0].ID != id || aw.Runs[0].Status != store.StatusCompleted {
		t.Fatalf("await: %d %+v", code, aw)
	}
	var get api.GetResult
	if code := f.do(t, "GET", "/v1/runs/"+id, "", &get); code != 200 || get.Run == nil || get.Run.ID != id || get.Run.Agent != "quick" {
		t.Fatalf("get: %d %+v", code, get)
	}
	var list api.RunsResult
	if code := f.do(t, "GET", "/v1/runs?status=completed,failed&agent=quick&limit=5&since="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "", &list); code != 200 || len(list.Runs) != 1 || list.Runs[0].ID != id {
		t.Fatalf("list: %d %+v", code, list)
	}
	if code := f.do(t, "GET", "/v1/runs?status=running", "", &list); code != 200 || len(list.Runs) != 0 {
		t.Fatalf("list running: %d %+v", code, list)
	}

	stored, err := f.st.Events(context.Background(), id, 0, 100)
	if err != nil || len(stored) != 6 { // init? no: 4 texts, done, and what the engine adds
		if err != nil || len(stored) < 5 {
			t.Fatalf("stored events: %d %v", len(stored), err)
		}
	}
	var evs []json.RawMessage
	if code := f.do(t, "GET", "/v1/runs/"+id+"/events?after=1", "", &evs); code != 200 || len(evs) != len(stored)-1 {
		t.Fatalf("events: %d, %d events, want %d", code, len(evs), len(stored)-1)
	}
	for i, ev := range evs {
		if string(ev) != string(stored[i+1].JSON) {
			t.Fatalf("event %d: %s, want %s verbatim", i, ev, stored[i+1].JSON)
		}
	}
	resp, err := f.ts.Client().Get(f.ts.URL + "/v1/runs/" + id + "/events?limit=2")
	if err != nil {
		t.Fatal(err)
	}
	json.NewDecoder(resp.Body).Decode(&evs)
	resp.Body.Close()
	if len(evs) != 2 || resp.Header.Get("Drover-More") != "true" {
		t.Fatalf("events limit=2: %d events, Drover-More %q", len(evs), resp.Header.Get("Drover-More"))
	}
}

// PRO-3: errors carry the protocol's codes with their HTTP statuses.
func TestPRO3_Errors(t *testing.T) {
	f := newFixture(t, server.Config{})
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/v1/runs/run_nope", "", 404, api.CodeNotFound},
		{"GET", "/v1/runs/run_nope/events", "", 404, api.CodeNotFound},
		{"GET", "/v1/runs/run_nope/await", "", 404, api.CodeNotFound},
		{"GET", "/v1/runs/run_nope/stream", "", 404, api.CodeNotFound},
		{"GET", "/v1/sessions/nope", "", 404, api.CodeNotFound},
		{"POST", "/v1/runs", "not json", 400, api.CodeInvalidRequest},
		{"POST", "/v1/runs", `{"agent":"quick","bogus":1}`, 400, api.CodeInvalidRequest},
		{"POST", "/v1/runs", `{"agent":"quick"} {}`, 400, api.CodeInvalidRequest},
		{"POST", "/v1/runs", `{"prompt":"hi"}`, 400, api.CodeValidation},
		{"POST", "/v1/runs", `{"agent":"quick","prompt":""}`, 400, api.CodeValidation},    // CON-1: as the CLI refuses it
		{"POST", "/v1/runs", `{"agent":"quick","prompt":" \n"}`, 400, api.CodeValidation}, // CON-1
		{"POST", "/v1/runs", `{"agent":"nosuch","prompt":"hi"}`, 400, api.CodeValidation},
		{"POST", "/v1/runs", `{"agent":"quick","options":{"timeout":"soon"}}`, 400, api.CodeInvalidRequest},
		{"POST", "/v1/runs", `{"agent":"quick","prompt":"hi","session":"ses_1"}`, 400, api.CodeInvalidRequest},
		{"GET", "/v1/runs?status=bogus", "", 400, api.CodeValidation},
		{"GET", "/v1/runs?limit=x", "", 400, api.CodeValidation},
		{"GET", "/v1/runs?since=yesterday", "", 400, api.CodeValidation},
		{"GET", "/v1/runs/run_nope/events?after=-1", "", 400, api.CodeValidation},
		{"GET", "/v1/runs/run_nope/stream?after=x", "", 400, api.CodeValidation},
	} {
		t.Run(c.method+" "+c.path+" "+c.body, func(t *testing.T) {
			f.fail(t, c.method, c.path, c.body, c.status, c.code)
		})
	}
	f.fail(t, "GET", "/v1/runs/x/stream", "", 400, api.CodeValidation, "Last-Event-ID", "abc")
	// Unknown routes and methods: the mux's 404 and 405.
	if code := f.do(t, "GET", "/v1/nothing", "", nil); code != 404 {
		t.Fatalf("unknown path: %d", code)
	}
	if code := f.do(t, "DELETE", "/v1/runs", "", nil); code != 405 {
		t.Fatalf("unknown method: %d", code)
	}
}

// PRO-3 / RUN-3: cancel over HTTP ends a run; it is idempotent.
func TestPRO3_Cancel(t *testing.T) {
	f := newFixture(t, server.Config{})
	id := f.start(t, "hang", "")
	var empty map[string]any
	if code := f.do(t, "POST", "/v1/runs/"+id+"/cancel", "", &empty); code != 200 {
		t.Fatalf("cancel: %d", code)
	}
	if rs := f.await(t, id); rs[0].Status != store.StatusFailed {
		t.Fatalf("cancelled run: %s", rs[0].Status)
	}
	for _, p := range []string{"/v1/runs/" + id + "/cancel", "/v1/runs/run_nope/cancel"} {
		if code := f.do(t, "POST", p, "", &empty); code != 200 {
			t.Fatalf("cancel again %s: %d", p, code)
		}
	}
}

// PRO-3: an await whose client goes away ends (goleak would see it
// otherwise); the run goes on.
func TestPRO3_AwaitClientGone(t *testing.T) {
	f := newFixture(t, server.Config{})
	id := f.start(t, "hang", "")
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", f.ts.URL+"/v1/runs/"+id+"/await", nil)
	if _, err := f.ts.Client().Do(req); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("await of a hanging run: %v", err)
	}
	var get api.GetResult
	if f.do(t, "GET", "/v1/runs/"+id, "", &get); get.Run.Status.Terminal() {
		t.Fatalf("run after the await left: %s", get.Run.Status)
	}
	f.do(t, "POST", "/v1/runs/"+id+"/cancel", "", nil)
	f.await(t, id)
}

// PRO-3: a stream client that disconnects mid-run and resumes with
// Last-Event-ID (or ?after=) gets every event once: no gap, no duplicate.
func TestPRO3_StreamResume(t *testing.T) {
	f := newFixture(t, server.Config{})
	id := f.start(t, "gated", "5")
	gate := make(chan struct{})
	f.gates.ch <- gate

	resp, sr := f.stream(t, "/v1/runs/"+id+"/stream")
	var got []sseEvent
	for len(got) < 3 {
		ev, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	resp.Body.Close() // mid-run: the run waits at its gate

	resp, sr = f.stream(t, "/v1/runs/"+id+"/stream", "Last-Event-ID", got[len(got)-1].ID)
	close(gate)
	for {
		ev, err := sr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	resp.Body.Close()
	rs := f.await(t, id)
	if rs[0].Status != store.StatusCompleted || int64(len(got)) != rs[0].LastSeq {
		t.Fatalf("got %d events, run %s with last seq %d", len(got), rs[0].Status, rs[0].LastSeq)
	}
	stored, _ := f.st.Events(context.Background(), id, 0, 1000)
	for i, ev := range got {
		checkEvent(t, ev, id, int64(i+1))
		if ev.Data != string(stored[i].JSON) {
			t.Fatalf("event %d: %s, want %s verbatim", i, ev.Data, stored[i].JSON)
		}
	}
	if got[len(got)-1].Type != "done" {
		t.Fatalf("last event %s, want done", got[len(got)-1].Type)
	}

	// ?after= resumes an ended run's stream too, and the stream ends.
	resp, sr = f.stream(t, "/v1/runs/"+id+"/stream?after="+strconv.Itoa(len(got)-2))
	defer resp.Body.Close()
	for i := len(got) - 1; i <= len(got)+1; i++ {
		ev, err := sr.next()
		if i == len(got)+1 {
			if err != io.EOF {
				t.Fatalf("want the end of the stream, got %+v %v", ev, err)
			}
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		checkEvent(t, ev, id, int64(i))
	}
}

// PRO-3: idle streams get ": ping" comments.
func TestPRO3_StreamHeartbeat(t *testing.T) {
	f := newFixture(t, server.Config{Heartbeat: 20 * time.Millisecond})
	id := f.start(t, "hang", "")
	resp, sr := f.stream(t, "/v1/runs/"+id+"/stream")
	defer resp.Body.Close()
	pings := 0
	for pings < 2 {
		line, err := sr.r.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if line == ": ping\n" {
			pings++
		}
	}
	f.do(t, "POST", "/v1/runs/"+id+"/cancel", "", nil)
	f.await(t, id)
}

// PRO-3: GET /v1/stream starts with the runs live when it opens (their
// events so far, without ids), says "synced", then carries every event of
// every run, with id = the event's ledger cursor, increasing.
func TestPRO3_StreamAll(t *testing.T) {
	f := newFixture(t, server.Config{})
	ended := f.start(t, "quick", "2")
	f.await(t, ended)
	gate := make(chan struct{})
	f.gates.ch <- gate
	live := f.start(t, "gated", "2")
	f.waitSeq(t, live, 2)

	resp, sr := f.stream(t, "/v1/stream")
	defer resp.Body.Close()
	for seq := int64(1); seq <= 2; seq++ { // the live run's events so far
		ev, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		if ev.ID != "" || runSeq(t, ev) != fmt.Sprintf("%s/%d", live, seq) {
			t.Fatalf("catch-up event %+v: want %s/%d without an id", ev, live, seq)
		}
	}
	ev, err := sr.next()
	if err != nil || ev.Type != "synced" || ev.ID == "" {
		t.Fatalf("after the catch-up: %+v %v, want synced with a cursor", ev, err)
	}
	last, _ := strconv.ParseInt(ev.ID, 10, 64)

	close(gate)
	b := f.start(t, "quick", "3")
	want := map[string]bool{}
	for seq := 3; seq <= 5; seq++ {
		want[fmt.Sprintf("%s/%d", live, seq)] = true
	}
	for seq := 1; seq <= 4; seq++ {
		want[fmt.Sprintf("%s/%d", b, seq)] = true
	}
	for len(want) > 0 {
		ev, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		cur, err := strconv.ParseInt(ev.ID, 10, 64)
		if err != nil || cur <= last {
			t.Fatalf("event %+v: id not a cursor after %d", ev, last)
		}
		last = cur
		k := runSeq(t, ev)
		if !want[k] {
			t.Fatalf("unexpected or repeated event %s (the ended run %s must not appear)", k, ended)
		}
		delete(want, k)
	}
}

// PRO-3: a client of GET /v1/stream that disconnects and comes back with
// Last-Event-ID gets every event recorded meanwhile, of every run, once.
func TestPRO3_StreamAllResume(t *testing.T) {
	f := newFixture(t, server.Config{})
	resp, sr := f.stream(t, "/v1/stream")
	if ev, err := sr.next(); err != nil || ev.Type != "synced" {
		t.Fatalf("first event %+v %v, want synced", ev, err)
	}
	gate := make(chan struct{})
	f.gates.ch <- gate
	a := f.start(t, "gated", "3")
	got := map[string]bool{}
	var lastID string
	for len(got) < 2 {
		ev, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		got[runSeq(t, ev)] = true
		lastID = ev.ID
	}
	resp.Body.Close() // gone mid-run; meanwhile the run goes on and another starts and ends

	close(gate)
	b := f.start(t, "quick", "2")
	f.await(t, a, b)

	resp, sr = f.stream(t, "/v1/stream", "Last-Event-ID", lastID)
	defer resp.Body.Close()
	want := 7 + 3 // a: 3 texts, gate, 3 texts, done; b: 2 texts, done
	for len(got) < want {
		ev, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		k := runSeq(t, ev)
		if got[k] {
			t.Fatalf("%s delivered twice", k)
		}
		got[k] = true
	}
	for _, k := range []string{a + "/1", a + "/7", b + "/1", b + "/3"} {
		if !got[k] {
			t.Fatalf("%s missing; got %v", k, got)
		}
	}
}

// runSeq is "runId/seq" of an SSE event's UES data.
func runSeq(t *testing.T, ev sseEvent) string {
	t.Helper()
	var u struct {
		RunID string `json:"runId"`
		Seq   int64  `json:"seq"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &u); err != nil || u.RunID == "" {
		t.Fatalf("event %+v is not a UES event of a run", ev)
	}
	return fmt.Sprintf("%s/%d", u.RunID, u.Seq)
}

// PRO-3: 100 subscribers on one run, one of which never reads: the run
// finishes on time and every other subscriber gets every event.
func TestPRO3_ManySubscribersOneStuck(t *testing.T) {
	f := newFixture(t, server.Config{})
	const n = 400 // 1 KiB each: more than the stuck connection buffers
	id := f.start(t, "big", strconv.Itoa(n))

	// The stuck one: a raw connection that sends its request and never reads.
	stuck, err := net.Dial("tcp", f.ts.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(stuck, "GET /v1/runs/%s/stream HTTP/1.1\r\nHost: %s\r\n\r\n", id, f.ts.Listener.Addr())

	const readers = 99
	var wg sync.WaitGroup
	counts := make([]int, readers)
	errs := make([]error, readers)
	opened := make(chan struct{}, readers)
	for i := range readers {
		wg.Go(func() {
			resp, err := f.ts.Client().Get(f.ts.URL + "/v1/runs/" + id + "/stream")
			opened <- struct{}{}
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			sr := &sseReader{r: newReader(resp.Body)}
			for {
				ev, err := sr.next()
				if err == io.EOF {
					return
				}
				if err != nil {
					errs[i] = err
					return
				}
				counts[i]++
				if ev.ID != strconv.Itoa(counts[i]) {
					errs[i] = fmt.Errorf("event id %s, want %d", ev.ID, counts[i])
					return
				}
			}
		})
	}
	for range readers {
		<-opened
	}
	gate := make(chan struct{})
	t0 := time.Now()
	f.gates.ch <- gate
	close(gate)
	rs := f.await(t, id)
	t.Logf("run took %s", time.Since(t0))
	if d := time.Since(t0); d > 15*time.Second {
		t.Errorf("the run took %s with a stuck subscriber", d)
	}
	wg.Wait()
	for i := range readers {
		if errs[i] != nil || int64(counts[i]) != rs[0].LastSeq {
			t.Fatalf("reader %d: %d events of %d: %v", i, counts[i], rs[0].LastSeq, errs[i])
		}
	}
	if rs[0].LastSeq < n {
		t.Fatalf("last seq %d, want at least %d", rs[0].LastSeq, n)
	}
}

// PRO-3: with a token, every request needs "Authorization: Bearer <token>".
func TestPRO3_Token(t *testing.T) {
	f := newFixture(t, server.Config{Token: "s3cret"})
	for _, hdr := range [][]string{nil, {"Authorization", "Bearer wrong"}, {"Authorization", "s3cret"}, {"Authorization", "Bearer s3cret2"}} {
		f.fail(t, "GET", "/v1/runs", "", 401, server.CodeUnauthorized, hdr...)
		f.fail(t, "POST", "/v1/runs", `{"agent":"quick"}`, 401, server.CodeUnauthorized, hdr...)
		f.fail(t, "GET", "/v1/stream", "", 401, server.CodeUnauthorized, hdr...)
	}
	var list api.RunsResult
	if code := f.do(t, "GET", "/v1/runs", "", &list, "Authorization", "Bearer s3cret"); code != 200 {
		t.Fatalf("with the token: %d", code)
	}
}

// PRO-3: request bodies are bounded.
func TestPRO3_BodyLimit(t *testing.T) {
	f := newFixture(t, server.Config{})
	body := `{"agent":"quick","prompt":"` + strings.Repeat("x", 1<<20) + `"}`
	f.fail(t, "POST", "/v1/runs", body, 413, server.CodeTooLarge)
	g := newFixture(t, server.Config{MaxBody: 64})
	g.fail(t, "POST", "/v1/runs", `{"agent":"quick","prompt":"`+strings.Repeat("y", 100)+`"}`, 413, server.CodeTooLarge)
	g.start(t, "quick", "1")
}

// PRO-3: state-changing requests from another origin are refused.
func TestPRO3_CrossOrigin(t *testing.T) {
	f := newFixture(t, server.Config{})
	body := `{"agent":"quick","prompt":"1"}`
	f.fail(t, "POST", "/v1/runs", body, 403, server.CodeForbidden, "Origin", "http://evil.example")
	f.fail(t, "POST", "/v1/runs", body, 403, server.CodeForbidden, "Sec-Fetch-Site", "cross-site")
	f.fail(t, "POST", "/v1/runs/run_x/cancel", "", 403, server.CodeForbidden, "Origin", "http://evil.example")
	var res runs.Started
	if code := f.do(t, "POST", "/v1/runs", body, &res, "Origin", f.ts.URL); code != 201 {
		t.Fatalf("same-origin POST: %d", code)
	}
	if code := f.do(t, "POST", "/v1/runs", body, &res, "Sec-Fetch-Site", "same-origin"); code != 201 {
		t.Fatalf("same-origin POST (Sec-Fetch-Site): %d", code)
	}
	var list api.RunsResult
	if code := f.do(t, "GET", "/v1/runs", "", &list, "Origin", "http://evil.example"); code != 200 {
		t.Fatalf("cross-origin GET: %d", code)
	}
	f.await(t, res.RunID)
}

// PRO-3: only loopback addresses may be served without a token.
func TestPRO3_CheckAddr(t *testing.T) {
	for addr, ok := range map[string]bool{
		"127.0.0.1:8765": true, "127.0.0.2:0": true, "[::1]:0": true, "localhost:0": true,
		"0.0.0.0:8765": false, ":8765": false, "[::]:0": false, "192.168.1.10:80": false, "example.com:80": false,
		"nonsense": false,
	} {
		err := server.CheckAddr(addr, "")
		if (err == nil) != ok {
			t.Errorf("CheckAddr(%q): %v", addr, err)
		}
		if err != nil && addr != "nonsense" && !strings.Contains(err.Error(), "token") {
			t.Errorf("CheckAddr(%q): %v does not mention the token", addr, err)
		}
	}
	if err := server.CheckAddr("0.0.0.0:8765", "t"); err != nil {
		t.Errorf("with a token: %v", err)
	}
}

// PRO-3: the OpenAPI description parses, describes every route, and its
// references resolve; it is served at /v1/openapi.json.
func TestPRO3_OpenAPI(t *testing.T) {
	var doc map[string]any
	if err := json.Unmarshal(server.OpenAPI, &doc); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	if v, _ := doc["openapi"].(string); !strings.HasPrefix(v, "3.") {
		t.Fatalf("openapi version %q", v)
	}
	paths, _ := doc["paths"].(map[string]any)
	for p, methods := range map[string][]string{
		"/v1/runs": {"get", "post"}, "/v1/runs/{id}": {"get"}, "/v1/runs/{id}/cancel": {"post"},
		"/v1/runs/{id}/await": {"get"}, "/v1/runs/{id}/events": {"get"}, "/v1/runs/{id}/stream": {"get"},
		"/v1/stream": {"get"}, "/v1/sessions/{id}": {"get"}, "/v1/openapi.json": {"get"},
		"/v1/runs/stream": {"get"}, "/v1/login": {"post"}, "/": {"get"}, "/metrics": {"get"},
		"/v1/runs/{id}/respond": {"post"}, "/v1/runs/{id}/steer": {"post"}, "/v1/runs/{id}/interrupt": {"post"},
	} {
		item, _ := paths[p].(map[string]any)
		for _, m := range methods {
			if op, _ := item[m].(map[string]any); op == nil || op["responses"] == nil {
				t.Errorf("%s %s is not described", m, p)
			}
		}
	}
	// Every route of every operation of the service (API-1), its path's
	// wildcard named {id} there.
	for _, op := range api.Ops {
		for _, route := range op.Routes {
			m, p, _ := strings.Cut(route, " ")
			p = regexp.MustCompile(`\{\w+\}`).ReplaceAllString(p, "{id}")
			item, _ := paths[p].(map[string]any)
			if o, _ := item[strings.ToLower(m)].(map[string]any); o == nil || o["responses"] == nil {
				t.Errorf("%s (op %s) is not described", route, op.Name)
			}
		}
	}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				var cur any = doc
				for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
					m, _ := cur.(map[string]any)
					cur = m[part]
				}
				if cur == nil {
					t.Errorf("unresolved $ref %s", ref)
				}
			}
			for _, x := range v {
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(doc)
	f := newFixture(t, server.Config{})
	var served map[string]any
	if code := f.do(t, "GET", "/v1/openapi.json", "", &served); code != 200 || served["openapi"] != doc["openapi"] {
		t.Fatalf("served openapi: %d", code)
	}
}

// PRO-3: a run the opening catch-up did not list (it ended, or started,
// while the stream opened) but whose events go on after the cursor is
// still seen from its first event: the tail sends its earlier events
// first. The race is staged through the ledger directly.
func TestPRO3_StreamAllRunStraddlingTheCursor(t *testing.T) {
	f := newFixture(t, server.Config{})
	ctx := context.Background()
	if err := f.st.CreateRun(ctx, &store.Run{ID: "straddle", Agent: "quick", Prompt: "p", Status: store.StatusPending}); err != nil {
		t.Fatal(err)
	}
	ev := func(seq int64) store.Event {
		js := fmt.Sprintf(`{"type":"text","agent":"quick","timestamp":1,"sessionId":"s","payload":{"content":"%d"},"runId":"straddle","seq":%d}`, seq, seq)
		return store.Event{RunID: "straddle", Seq: seq, Type: "text", JSON: []byte(js), Time: time.Now()}
	}
	if err := f.st.AppendEvents(ctx, []store.Event{ev(1), ev(2)}); err != nil {
		t.Fatal(err)
	}
	if err := f.st.FinishRun(ctx, store.Finish{RunID: "straddle", Status: store.StatusCompleted, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	resp, sr := f.stream(t, "/v1/stream")
	defer resp.Body.Close()
	if e, err := sr.next(); err != nil || e.Type != "synced" {
		t.Fatalf("first event %+v %v, want synced (no live run)", e, err)
	}
	if err := f.st.AppendEvents(ctx, []store.Event{ev(3)}); err != nil {
		t.Fatal(err)
	}
	for seq := 1; seq <= 3; seq++ {
		e, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		if k := runSeq(t, e); k != fmt.Sprintf("straddle/%d", seq) || (seq < 3) != (e.ID == "") {
			t.Fatalf("event %d: %s id %q", seq, k, e.ID)
		}
	}
}
