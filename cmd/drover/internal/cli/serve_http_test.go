package cli

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
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
