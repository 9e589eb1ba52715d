package server_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// SEC-1: without a token, a request naming a host that is not loopback is
// refused before anything else, so a DNS-rebinding page (its own name
// resolving to 127.0.0.1, its Origin matching its Host) cannot start a run;
// with a token the token guards instead.
func TestSEC1_DNSRebindingRefused(t *testing.T) {
	f := newFixture(t, server.Config{})
	port := strings.TrimPrefix(f.ts.URL, "http://127.0.0.1:")
	rebound := func(method, path, host string, body string) int {
		req, _ := http.NewRequest(method, f.ts.URL+path, strings.NewReader(body))
		req.Host = host
		req.Header.Set("Origin", "http://"+host)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.evil.example:" + port, "0.0.0.0:" + port, "[::]:" + port} {
		if code := rebound("POST", "/v1/runs", host, `{"agent":"quick","prompt":"1"}`); code != http.StatusForbidden {
			t.Errorf("POST /v1/runs with Host %s: %d, want 403", host, code)
		}
		if code := rebound("GET", "/v1/runs", host, ""); code != http.StatusForbidden {
			t.Errorf("GET /v1/runs with Host %s: %d, want 403", host, code)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "[::1]:" + port, "localhost"} {
		if code := rebound("GET", "/v1/runs", host, ""); code != http.StatusOK {
			t.Errorf("GET /v1/runs with Host %s: %d, want 200", host, code)
		}
	}
	if rs, _ := f.st.ListRuns(t.Context(), storeFilter()); len(rs) != 0 {
		t.Fatalf("%d runs started by rebound requests", len(rs))
	}

	// With a token, any Host is served if the token is right.
	g := newFixture(t, server.Config{Token: "tok"})
	req, _ := http.NewRequest("GET", g.ts.URL+"/v1/runs", nil)
	req.Host = "drover.internal:8765"
	req.Header.Set("Authorization", "Bearer tok")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("token and another host: %d", resp.StatusCode)
	}
}

// SEC-1: a client cannot start an autonomous run unless the server's
// operator allows it (BOUNDARY_VIOLATION, 403); the protocol refuses it
// the same way.
func TestSEC1_AutonomousNeedsTheOperator(t *testing.T) {
	f := newFixture(t, server.Config{})
	f.fail(t, "POST", "/v1/runs", `{"agent":"quick","prompt":"1","options":{"tier":"autonomous"}}`, 403, api.CodeBoundaryViolation)
	f.fail(t, "POST", "/v1/runs", `{"agent":"quick","prompt":"1","options":{"tier":"unrestricted"}}`, 403, api.CodeBoundaryViolation)
	var res runs.Started
	if code := f.do(t, "POST", "/v1/runs", `{"agent":"quick","prompt":"1","options":{"tier":"supervised"}}`, &res); code != 201 {
		t.Fatalf("supervised: %d", code)
	}
	srv := server.New(api.NewLocal(f.sup, api.Config{AllowAutonomous: true}), server.Config{})
	ts := httptest.NewServer(srv)
	defer ts.Close()
	defer srv.Close()
	resp, err := http.Post(ts.URL+"/v1/runs", "application/json", strings.NewReader(`{"agent":"quick","prompt":"1","options":{"tier":"autonomous"}}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("autonomous on a server that allows it: %d", resp.StatusCode)
	}
}

// FuzzSEC1_Headers: whatever Host, Origin, token and tier a request
// carries, a server without a token serves only loopback hosts, never
// starts an autonomous run, and never fails inside (5xx).
func FuzzSEC1_Headers(f *testing.F) {
	f.Add("127.0.0.1", "", "", "supervised")
	f.Add("evil.example", "http://evil.example", "", "autonomous")
	f.Add("localhost", "http://localhost", "Bearer x", "unrestricted")
	f.Add("[::1]", "null", "", "")
	f.Add("127.0.0.1.nip.io", "http://127.0.0.1.nip.io", "", "dry-run")
	fx := newFixture(f, server.Config{})
	f.Fuzz(func(t *testing.T, host, origin, auth, tier string) {
		body := `{"agent":"quick","prompt":"0","options":{"tier":` + quote(tier) + `}}`
		req, err := http.NewRequest("POST", fx.ts.URL+"/v1/runs", strings.NewReader(body))
		if err != nil {
			return
		}
		req.Host = host
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return // a header Go's client will not send
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		h := host
		if hh, _, err := net.SplitHostPort(host); err == nil {
			h = hh
		}
		if host == "" {
			h = "127.0.0.1" // the client names the URL's host
		}
		if resp.StatusCode >= 500 {
			t.Fatalf("Host %q Origin %q tier %q: %d", host, origin, tier, resp.StatusCode)
		}
		if resp.StatusCode < 300 && !server.IsLoopback(h) {
			t.Fatalf("served a request for host %q: %d", host, resp.StatusCode)
		}
		if t, err := drover.ParseTier(tier); err == nil && t == drover.TierAutonomous && resp.StatusCode < 300 {
			panic("an autonomous run was started by a client")
		}
	})
}

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r < 0x20:
			b.WriteString(" ")
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

func storeFilter() store.RunFilter { return store.RunFilter{} }

// SEC-1: a client that presents wrong tokens — to the login endpoint or as
// a bearer — is answered 429 after a burst, without its next token being
// compared (even the right one), until it waits; a client that presents
// none is not counted.
func TestSEC1_WrongTokensAreRateLimited(t *testing.T) {
	f := newFixture(t, server.Config{Token: "right"})
	for range 5 {
		f.fail(t, "GET", "/v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized) // no token: not a guess
	}
	for i := range 10 {
		if i%2 == 0 {
			f.fail(t, "POST", "/v1/login", `{"token":"guess"}`, http.StatusUnauthorized, server.CodeUnauthorized)
		} else {
			f.fail(t, "GET", "/v1/runs", "", http.StatusUnauthorized, server.CodeUnauthorized, "Authorization", "Bearer guess")
		}
	}
	f.fail(t, "POST", "/v1/login", `{"token":"guess"}`, http.StatusTooManyRequests, server.CodeTooManyRequests)
	f.fail(t, "GET", "/v1/runs", "", http.StatusTooManyRequests, server.CodeTooManyRequests, "Authorization", "Bearer right")
	// One guess comes back a second later.
	time.Sleep(1100 * time.Millisecond)
	if code := f.do(t, "GET", "/v1/runs", "", nil, "Authorization", "Bearer right"); code != http.StatusOK {
		t.Fatalf("the right token after waiting: %d", code)
	}
}
