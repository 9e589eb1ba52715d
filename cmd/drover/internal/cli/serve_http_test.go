package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// PRO-3: drover serve refuses a non-loopback address without a token.
func TestPRO3_ServeNonLoopbackNeedsToken(t *testing.T) {
	t.Setenv("DROVER_TOKEN", "")
	db := filepath.Join(t.TempDir(), "drover.db")
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		var out, errOut strings.Builder
		code := Run(context.Background(), []string{"serve", "--addr", addr, "--db", db}, strings.NewReader(""), &out, &errOut)
		if code != ExitUsage || !strings.Contains(errOut.String(), "token") {
			t.Errorf("serve --addr %s: exit %d, stderr %q", addr, code, errOut.String())
		}
	}
}

// PRO-3: drover serve (HTTP mode) answers with a token from DROVER_TOKEN,
// refuses requests without it, and exits 130 on a signal.
func TestPRO3_ServeHTTP(t *testing.T) {
	t.Setenv("DROVER_TOKEN", "tok")
	db := filepath.Join(t.TempDir(), "drover.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out strings.Builder
	var errOut syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", db}, strings.NewReader(""), &out, &errOut)
	}()
	re := regexp.MustCompile(`http://127\.0\.0\.1:\d+`)
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == ""; {
		if url = re.FindString(errOut.String()); url == "" {
			if time.Now().After(deadline) {
				t.Fatalf("no address announced: %q", errOut.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	get := func(auth string) int {
		req, _ := http.NewRequest("GET", url+"/v1/runs", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("without the token: %d", code)
	}
	if code := get("Bearer tok"); code != http.StatusOK {
		t.Errorf("with the token: %d", code)
	}
	http.DefaultClient.CloseIdleConnections()
	cancel()
	select {
	case code := <-exited:
		if code != ExitInterrupted {
			t.Fatalf("exit %d after a signal, want %d: %s", code, ExitInterrupted, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit after a signal")
	}
}

// SEC-1: drover serve with no token given makes one of its own and prints
// it in the dashboard's address; requests without it are refused. With
// --no-token it serves loopback names only; autonomous runs, and every
// option that widens a run beyond its tier, need --allow-autonomous.
func TestSEC1_ServeTokenByDefault(t *testing.T) {
	t.Setenv("DROVER_TOKEN", "")
	for _, c := range []struct {
		args       []string
		tokenInURL bool
	}{
		{nil, true},
		{[]string{"--no-token"}, false},
		{[]string{"--no-token", "--allow-autonomous"}, false},
	} {
		db := filepath.Join(t.TempDir(), "drover.db")
		ctx, cancel := context.WithCancel(context.Background())
		var errOut syncBuffer
		exited := make(chan int, 1)
		go func() {
			exited <- Run(ctx, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", db}, c.args...), strings.NewReader(""), &strings.Builder{}, &errOut)
		}()
		re := regexp.MustCompile(`dashboard at (http://127\.0\.0\.1:\d+)/(#token=([0-9a-f]{32}))?`)
		var m []string
		for deadline := time.Now().Add(10 * time.Second); m == nil; time.Sleep(10 * time.Millisecond) {
			if m = re.FindStringSubmatch(errOut.String()); m == nil && time.Now().After(deadline) {
				t.Fatalf("%v: no dashboard announced: %q", c.args, errOut.String())
			}
		}
		url, token := m[1], m[3]
		if (token != "") != c.tokenInURL {
			t.Fatalf("%v: announced %q", c.args, m[0])
		}
		do := func(method, path, host, auth, body string) int {
			req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
			if host != "" {
				req.Host = host
			}
			if auth != "" {
				req.Header.Set("Authorization", "Bearer "+auth)
			}
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		if c.tokenInURL {
			if code := do("GET", "/v1/runs", "", "", ""); code != http.StatusUnauthorized {
				t.Errorf("no token: %d", code)
			}
			if code := do("GET", "/v1/runs", "", token, ""); code != http.StatusOK {
				t.Errorf("the printed token: %d", code)
			}
		} else {
			if code := do("GET", "/v1/runs", "", "", ""); code != http.StatusOK {
				t.Errorf("--no-token, loopback: %d", code)
			}
			if code := do("GET", "/v1/runs", "evil.example:8765", "", ""); code != http.StatusForbidden {
				t.Errorf("--no-token, another host: %d", code)
			}
			want := http.StatusForbidden
			if slices.Contains(c.args, "--allow-autonomous") {
				want = http.StatusCreated
			}
			if code := do("POST", "/v1/runs", "", "", `{"agent":"claude","prompt":"x","options":{"tier":"autonomous","binary":"/bin/true"}}`); code != want {
				t.Errorf("%v: autonomous run: %d, want %d", c.args, code, want)
			}
			// Every option that widens a run beyond its tier passes the
			// same gate (SEC-5).
			for _, o := range wideningOptions {
				code := do("POST", "/v1/runs/check", "", "", `{"agent":"claude","prompt":"x","options":`+o+`}`)
				if refused := code == http.StatusForbidden; refused != (want == http.StatusForbidden) {
					t.Errorf("%v: check %s: %d", c.args, o, code)
				}
			}
		}
		http.DefaultClient.CloseIdleConnections()
		cancel()
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			t.Fatal("serve did not exit")
		}
	}
}
