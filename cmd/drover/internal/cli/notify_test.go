package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/notify"
)

// hook is a webhook receiver on 127.0.0.1: it keeps every body posted.
type hook struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newHook(t *testing.T) *hook {
	h := &hook{}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.mu.Lock()
		h.bodies = append(h.bodies, string(b))
		h.mu.Unlock()
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) notices(t *testing.T) []notify.Notice {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []notify.Notice
	for _, b := range h.bodies {
		var n notify.Notice
		if err := json.Unmarshal([]byte(b), &n); err != nil {
			t.Fatalf("a notice is not JSON: %s", b)
		}
		out = append(out, n)
	}
	return out
}

// CON-3: drover run --notify URL posts a notice when a run asks for
// permission (with the command to answer it), when it ends (its outcome
// and what was denied) and when its budget ends it; a secret of drover's
// environment that the agent's command carries is not in any body; a
// target that is not a URL or "desktop" is refused before anything runs.
func TestCON3_NotifyWebhook(t *testing.T) {
	const secret = "sk-ant-notify-secret-0123456789"
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	t.Setenv("ANTHROPIC_API_KEY", secret)
	t.Setenv("FAKE_OVER_BUDGET", "1")
	t.Setenv("FAKE_COMMAND", "curl -H 'x-api-key: "+secret+"' https://api.example/build")
	h := newHook(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, out, errOut, _ := runCLI(t, ctx, "ask", "run", "--notify", h.URL+"/hook?token=abc", "--approval-timeout", "500ms",
		"--max-budget-usd", "0.0005", "-a", "claude", "build it")
	if code == ExitUsage {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	id := runIDRe.FindStringSubmatch(errOut)[1]
	kinds := map[notify.Kind]notify.Notice{}
	for _, n := range h.notices(t) {
		kinds[n.Kind] = n
		if n.RunID != id || n.Agent != "claude-code" {
			t.Errorf("notice about %s/%s, want %s/claude-code", n.RunID, n.Agent, id)
		}
	}
	h.mu.Lock()
	for _, b := range h.bodies {
		if strings.Contains(b, secret) {
			t.Errorf("a notice carries the secret: %s", b)
		}
	}
	h.mu.Unlock()
	p, ok := kinds[notify.KindPermission]
	if !ok || p.Tool != "Bash" || !strings.Contains(p.Text, "drover approve "+id) || p.Deadline.IsZero() || !strings.Contains(p.Summary, "[redacted]") {
		t.Errorf("permission notice %+v", p)
	}
	end, ok := kinds[notify.KindRunEnded]
	if !ok || end.Outcome != "max_budget" || end.Summary != "1 tool call, 1 denied" || !strings.Contains(end.Text, "max_budget") {
		t.Errorf("end notice %+v", end)
	}
	if b, ok := kinds[notify.KindBudget]; !ok || !strings.Contains(b.Text, "budget") {
		t.Errorf("budget notice %+v", b)
	}

	for _, bad := range []string{"ftp://example.test/x", "not a url", "http://"} {
		code, _, errOut, _ := runCLI(t, ctx, "ok", "run", "--notify", bad, "-a", "claude", "x")
		if code != ExitUsage || !strings.Contains(errOut, "--notify") {
			t.Errorf("--notify %q: exit %d, %s", bad, code, errOut)
		}
	}
	if _, err := os.Stat(os.Getenv("DROVER_DB")); err != nil {
		t.Fatal(err)
	}
}
