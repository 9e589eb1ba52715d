package cli

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCLI_FakemodelServes(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "log.jsonl")
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	code := make(chan int, 1)
	go func() {
		code <- Run(ctx, []string{"fakemodel", "--addr", "127.0.0.1:0", "--log", logPath}, strings.NewReader(""), &out, io.Discard)
	}()
	var url string
	for deadline := time.Now().Add(10 * time.Second); url == "" && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, after, ok := strings.Cut(out.String(), "listening on "); ok {
			url = strings.TrimSpace(after)
		}
	}
	if url == "" {
		cancel()
		t.Fatalf("no URL printed: %q", out.String())
	}
	resp, err := http.Post(url+"/v1/messages", "application/json",
		strings.NewReader(`{"model":"m","max_tokens":10,"messages":[{"role":"user","content":"run ls"}]}`))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	cancel()
	if c := <-code; c != ExitOK {
		t.Fatalf("exit %d", c)
	}
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"name":"Bash"`) {
		t.Fatalf("answer %d %s", resp.StatusCode, body)
	}
	if log, _ := os.ReadFile(logPath); !strings.Contains(string(log), `"prompt":"run ls"`) {
		t.Fatalf("request log: %s", log)
	}
}
