package e2e

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/notify"
	"github.com/drover-run/drover/runs"
)

// receiver is a webhook receiver on 127.0.0.1 keeping every body.
type receiver struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newReceiver(t *testing.T) *receiver {
	r := &receiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.bodies = append(r.bodies, string(b))
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// notices returns the notices received, and fails on a body that holds
// secret.
func (r *receiver) notices(t *testing.T, secret string) []notify.Notice {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []notify.Notice
	for _, b := range r.bodies {
		if strings.Contains(b, secret) {
			t.Errorf("a notice carries a secret: %s", b)
		}
		var n notify.Notice
		if err := json.Unmarshal([]byte(b), &n); err != nil {
			t.Fatalf("notice %s: %v", b, err)
		}
		out = append(out, n)
	}
	return out
}

// TestCON2_InboxAcrossProcesses: two drover processes run the real Claude
// Code and Codex, supervised, each asked by its scripted model to run a
// command that is not read-only; nobody is at their terminals. `drover
// inbox` from a third process lists both requests and answers them; both
// runs then make their file and complete. A webhook receiver on 127.0.0.1
// gets each request and each end (CON-3), and a Gemini run stopped by its
// budget sends the budget notice; no body carries the credential in
// drover's environment.
func TestCON2_InboxAcrossProcesses(t *testing.T) {
	const secret = "sk-e2e-inbox-secret-5f2a9c"
	w := newContainWorld(t, buildDrover(t), "claude")
	hook := newReceiver(t)
	script := w.write("script.json", `{"rules":[{"match":"make","steps":[{"tools":[{"shell":"touch made.txt"}]},{"text":"made"}]}]}`)
	env := append(w.env, "DROVER_DB="+w.db, "OPENAI_API_KEY="+secret)
	type proc struct {
		cmd          *exec.Cmd
		ws           string
		stdout, errb strings.Builder
	}
	var ps []*proc
	for _, agent := range []string{"claude", "codex"} {
		p := &proc{ws: filepath.Join(w.ws, agent)}
		if err := os.MkdirAll(p.ws, 0o755); err != nil {
			t.Fatal(err)
		}
		p.cmd = exec.Command(w.drover, "run", "--fakemodel-script", script, "--approval-timeout", "3m",
			"--notify", hook.srv.URL+"/hook/T0K3N?x=1", "--cwd", p.ws, "-a", agent, "make the file")
		p.cmd.Dir, p.cmd.Env = w.ws, env
		p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.errb
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	t.Cleanup(func() {
		for _, p := range ps {
			if p.cmd.ProcessState == nil {
				p.cmd.Process.Kill()
				p.cmd.Wait()
			}
		}
	})

	// Both requests show in a third process's inbox.
	var waiting []runs.Waiting
	for deadline := time.Now().Add(90 * time.Second); len(waiting) < 2; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the inbox shows %d requests, want 2: %+v\n%s\n%s", len(waiting), waiting, ps[0].errb.String(), ps[1].errb.String())
		}
		out, stderr, code := w.droverCmd("inbox", "--json")
		if code != 0 {
			t.Fatalf("drover inbox --json: exit %d: %s", code, stderr)
		}
		waiting = waiting[:0]
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var x runs.Waiting
			if err := json.Unmarshal(sc.Bytes(), &x); err != nil {
				t.Fatalf("inbox line %s: %v", sc.Text(), err)
			}
			waiting = append(waiting, x)
		}
	}
	agents := map[string]bool{}
	for _, x := range waiting {
		agents[x.Agent] = true
		if x.Owner == "" || x.AskedAt.IsZero() || x.Request.Deadline == 0 || !strings.Contains(x.Request.Description, "touch made.txt") {
			t.Errorf("inbox entry %+v", x)
		}
	}
	if !agents["claude-code"] || !agents["codex"] {
		t.Fatalf("inbox agents %v", agents)
	}
	out, stderr, code := w.droverCmdIn("y\ny\n", "inbox", "--ask")
	if code != 0 || strings.Count(out, "allowed") < 2 || !strings.Contains(out, "2 requests answered") {
		t.Fatalf("drover inbox --ask: exit %d\n%s\n%s", code, out, stderr)
	}
	for _, p := range ps {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("%v: %v\n%s\n%s", p.cmd.Args, err, p.stdout.String(), p.errb.String())
		}
		if _, err := os.Stat(filepath.Join(p.ws, "made.txt")); err != nil {
			t.Errorf("%s: the allowed command did not run: %v\n%s", p.ws, err, p.stdout.String())
		}
		if !strings.Contains(p.stdout.String(), "allowed") || !strings.Contains(p.stdout.String(), "drover inbox") {
			t.Errorf("%s: the run does not say who allowed it:\n%s", p.ws, p.stdout.String())
		}
	}

	// A run its budget stops sends the budget notice.
	budget := w.write("loop.json", limitsScript)
	gws := filepath.Join(w.ws, "gemini")
	os.MkdirAll(gws, 0o755)
	cmd := exec.Command(w.drover, "run", "--fakemodel-script", budget, "--tier", "autonomous", "--max-budget-usd", "0.1",
		"--notify", hook.srv.URL+"/hook/T0K3N", "--cwd", gws, "-a", "gemini", "loop please")
	cmd.Dir, cmd.Env = w.ws, append(env, "DROVER_PRICES=")
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("a run over its budget exited 0:\n%s", out)
	}

	kinds := map[notify.Kind]int{}
	for _, n := range hook.notices(t, secret) {
		kinds[n.Kind]++
		if n.Kind == notify.KindRunEnded && n.Agent != "gemini" && (n.Outcome != "completed" || !strings.Contains(n.Summary, "1 allowed")) {
			t.Errorf("end notice %+v", n)
		}
	}
	if kinds[notify.KindPermission] != 2 || kinds[notify.KindRunEnded] != 3 || kinds[notify.KindBudget] != 1 {
		t.Errorf("notices by kind %v, want 2 requests, 3 ends, 1 budget", kinds)
	}
}

// droverCmdIn is droverCmd with stdin.
func (w *containWorld) droverCmdIn(stdin string, args ...string) (string, string, int) {
	w.t.Helper()
	cmd := exec.Command(w.drover, args...)
	cmd.Dir, cmd.Env = w.ws, append(w.env, "DROVER_DB="+w.db)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		w.t.Fatalf("drover %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}
