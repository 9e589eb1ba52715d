package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// PRO-4: the dashboard's files are served by the binary itself, locked to
// their own origin by a CSP, and hold no data, so they need no token.
func TestPRO4_DashboardServed(t *testing.T) {
	f := newFixture(t, server.Config{Token: "s3cret"})
	for path, want := range map[string]string{
		"/":        "text/html",
		"/app.js":  "text/javascript",
		"/app.css": "text/css",
	} {
		resp, err := f.ts.Client().Get(f.ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), want) || len(b) < 100 {
			t.Fatalf("GET %s: %d %q, %d bytes", path, resp.StatusCode, resp.Header.Get("Content-Type"), len(b))
		}
		csp := resp.Header.Get("Content-Security-Policy")
		if !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Fatalf("GET %s: CSP %q", path, csp)
		}
	}
	// Only the dashboard's own files are public.
	f.fail(t, "GET", "/v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized)
	f.fail(t, "GET", "/index.html/../v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized)
	f.fail(t, "GET", "/nothing-here", "", http.StatusUnauthorized, server.CodeUnauthorized)
}

// PRO-4: a browser trades the token for an HttpOnly cookie, which then
// authorizes JSON requests and EventSource streams alike; a wrong token or
// a forged cookie is refused.
func TestPRO4_LoginCookie(t *testing.T) {
	f := newFixture(t, server.Config{Token: "tok; with=odd chars"})
	f.fail(t, "POST", "/v1/login", `{"token":"nope"}`, http.StatusUnauthorized, server.CodeUnauthorized)
	f.fail(t, "POST", "/v1/login", `not json`, http.StatusBadRequest, "INVALID_REQUEST")
	f.fail(t, "POST", "/v1/login", `{"token":"`+strings.Repeat("x", 100<<10)+`"}`, http.StatusRequestEntityTooLarge, server.CodeTooLarge)

	resp, err := f.ts.Client().Post(f.ts.URL+"/v1/login", "application/json", strings.NewReader(`{"token":"tok; with=odd chars"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var cookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == server.CookieName {
			cookie = c
		}
	}
	if resp.StatusCode != http.StatusNoContent || cookie == nil || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("login: %d, cookie %+v", resp.StatusCode, cookie)
	}
	withCookie := "Cookie"
	good := server.CookieName + "=" + cookie.Value
	if code := f.do(t, "GET", "/v1/runs", "", nil, withCookie, good); code != http.StatusOK {
		t.Fatalf("GET /v1/runs with the cookie: %d", code)
	}
	var res struct {
		RunID string `json:"runId"`
	}
	if code := f.do(t, "POST", "/v1/runs", `{"agent":"quick","prompt":"1"}`, &res, withCookie, good); code != http.StatusCreated {
		t.Fatalf("POST /v1/runs with the cookie: %d", code)
	}
	sresp, sr := f.stream(t, "/v1/runs/"+res.RunID+"/stream", withCookie, good)
	defer sresp.Body.Close()
	if ev, err := sr.next(); err != nil || ev.ID != "1" {
		t.Fatalf("stream with the cookie: %+v %v", ev, err)
	}
	f.fail(t, "GET", "/v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized, withCookie, server.CookieName+"=dG9rZW4")
	f.fail(t, "GET", "/v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized, withCookie, server.CookieName+"=%%%")
	// A wrong bearer header is not rescued by a good cookie.
	f.fail(t, "GET", "/v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized, withCookie, good, "Authorization", "Bearer wrong")
	f.await(t, res.RunID)

	// Without a token configured, login answers 204 and sets nothing.
	open := newFixture(t, server.Config{})
	resp, err = open.ts.Client().Post(open.ts.URL+"/v1/login", "application/json", strings.NewReader(`{"token":""}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || len(resp.Cookies()) != 0 {
		t.Fatalf("login without a token configured: %d %v", resp.StatusCode, resp.Cookies())
	}
}

// PRO-4: GET /v1/runs/stream sends a snapshot of the run records, then
// every change: a new run appears, goes running, and ends with its usage
// and last seq.
func TestPRO4_RunsStream(t *testing.T) {
	f := newFixture(t, server.Config{})
	old := f.start(t, "quick", "2")
	f.await(t, old)

	resp, sr := f.stream(t, "/v1/runs/stream?limit=10")
	defer resp.Body.Close()
	next := func() (string, store.Run) {
		t.Helper()
		ev, err := sr.next()
		if err != nil {
			t.Fatal(err)
		}
		var r store.Run
		if ev.Type == "run" {
			if err := json.Unmarshal([]byte(ev.Data), &r); err != nil {
				t.Fatalf("run event data %q: %v", ev.Data, err)
			}
		}
		if ev.ID != "" {
			t.Fatalf("run records carry no id, got %q", ev.ID)
		}
		return ev.Type, r
	}
	if typ, r := next(); typ != "run" || r.ID != old || r.Status != store.StatusCompleted || r.LastSeq != 3 {
		t.Fatalf("snapshot: %s %+v", typ, r)
	}
	if typ, _ := next(); typ != "synced" {
		t.Fatalf("after the snapshot: %s, want synced", typ)
	}

	gate := make(chan struct{})
	f.gates.ch <- gate
	id := f.start(t, "gated", "2")
	var seen []store.RunStatus
	for {
		typ, r := next()
		if typ != "run" || r.ID != id {
			t.Fatalf("%s %+v: want only records of %s", typ, r, id)
		}
		if len(seen) == 0 || seen[len(seen)-1] != r.Status {
			seen = append(seen, r.Status)
		}
		if r.Status == store.StatusRunning && r.LastSeq == 2 {
			close(gate) // the run is visibly live; let it finish
		}
		if r.Status.Terminal() {
			if r.Status != store.StatusCompleted || r.LastSeq != 5 || r.EndedAt.IsZero() {
				t.Fatalf("last record %+v", r)
			}
			break
		}
	}
	if seen[len(seen)-1] != store.StatusCompleted || !slices.Contains(seen, store.StatusRunning) {
		t.Fatalf("statuses seen %v, want running then completed", seen)
	}

	f.fail(t, "GET", "/v1/runs/stream?limit=0", "", http.StatusBadRequest, "VALIDATION_ERROR")
	f.fail(t, "GET", "/v1/runs/stream?limit=5000", "", http.StatusBadRequest, "VALIDATION_ERROR")
}
