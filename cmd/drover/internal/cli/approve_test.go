package cli

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// shown is `drover show --json`.
type shown struct {
	Run       store.Run
	ToolCalls []store.ToolCall
	Pending   []drover.PermissionRequestPayload
}

func showRun(t *testing.T, id string) shown {
	t.Helper()
	code, out, errOut := cli(t, "ok", "show", "--json", id)
	var s shown
	if err := json.Unmarshal([]byte(out), &s); code != ExitOK || err != nil {
		t.Fatalf("show %s: %d %v %s", id, code, err, errOut)
	}
	return s
}

// CTL-1: drover run asks the person at the terminal (here --ask, answers
// piped in): y allows and the call runs; "n MESSAGE" denies it and the
// model is told why. The ledger records the terminal as who answered.
func TestCTL1_AskAtTheTerminal(t *testing.T) {
	for _, c := range []struct {
		answer   string
		behavior drover.Behavior
		status   drover.ToolStatus
		message  string
	}{
		{"y\n", drover.Allow, drover.ToolSuccess, ""},
		{"maybe\nn not on a Friday\n", drover.Deny, drover.ToolDenied, "not on a Friday"},
	} {
		t.Run(string(c.behavior), func(t *testing.T) {
			t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
			ctx := withStdin(context.Background(), strings.NewReader(c.answer))
			code, out, errOut, pid := runCLI(t, ctx, "ask", "run", "--ask", "-a", "claude", "build it")
			if code != ExitOK {
				t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
			}
			assertGone(t, pid)
			wants := []string{"? Bash wants to: Running `make`", "Bash: allow? y(es), n(o) [MESSAGE], a(lways), denied in", "allowed Bash (terminal)",
				"1 tool call, 1 allowed"}
			if c.behavior == drover.Deny {
				// "maybe" is asked again.
				wants = []string{"answer y, n [MESSAGE] or a(lways)\n", "denied Bash (terminal)", "1 tool call, 1 denied"}
			}
			for _, want := range wants {
				if !strings.Contains(out, want) {
					t.Errorf("stdout lacks %q:\n%s", want, out)
				}
			}
			id := runIDRe.FindStringSubmatch(errOut)[1]
			s := showRun(t, id)
			if len(s.ToolCalls) != 1 || s.ToolCalls[0].Status != c.status {
				t.Fatalf("tool calls %+v", s.ToolCalls)
			}
			p := s.ToolCalls[0].Permission
			if p == nil || p.Behavior != c.behavior || p.By != drover.ByClient || p.Detail != "terminal" || p.Message != c.message {
				t.Fatalf("permission %+v", p)
			}
		})
	}
}

// CTL-1, CTL-3: drover approve, steer and interrupt in one process act on a
// run owned by another drover process, through the ledger, and say what
// happened; a second answer is refused; a rule answers without asking.
func TestCTL3_ControlFromAnotherProcess(t *testing.T) {
	bin := buildDrover(t)
	db := filepath.Join(t.TempDir(), "drover.db")
	t.Setenv("DROVER_DB", db)

	// A request answered with drover approve.
	owner, sc, stderr, pidfile := startDrover(t, bin, db, "ask", "run", "--json", "-a", "claude", "--approval-timeout", "1m", "build it")
	waitLine(t, sc, `"type":"permission_request"`)
	id := runIDRe.FindStringSubmatch(stderr.String())[1]
	if s := showRun(t, id); len(s.Pending) != 1 || s.Pending[0].RequestID != "req-1" {
		t.Fatalf("pending %+v", s.Pending)
	}
	start := time.Now()
	if code, _, errOut := cli(t, "ok", "approve", id); code != ExitOK || !strings.Contains(errOut, "allowed") {
		t.Fatalf("approve: %d %s", code, errOut)
	}
	t.Logf("approved across processes in %s", time.Since(start))
	rest := drain(sc)
	if err := owner.Wait(); err != nil {
		t.Fatalf("owner: %v\n%s", err, stderr)
	}
	if !strings.Contains(rest, `"by":"client","detail":"drover approve"`) || !strings.Contains(rest, `"status":"success"`) {
		t.Fatalf("owner's events after the answer:\n%s", rest)
	}
	assertGone(t, pidOf(t, pidfile))

	// Steering and interrupting; the call allowed by a rule, nobody asked.
	owner, sc, stderr, pidfile = startDrover(t, bin, db, "ask-wait", "run", "--json", "-a", "claude", "--allow", "Bash(make)", "build it")
	waitLine(t, sc, `"by":"rule","detail":"allow:Bash(make)"`)
	id = runIDRe.FindStringSubmatch(stderr.String())[1]
	if code, _, errOut := cli(t, "ok", "deny", id, "req-1"); code == ExitOK || !strings.Contains(errOut, "already answered") {
		t.Fatalf("a second answer: %d %s", code, errOut)
	}
	if code, _, errOut := cli(t, "ok", "steer", id, "also", "lint"); code != ExitOK || !strings.Contains(errOut, "message sent") {
		t.Fatalf("steer: %d %s", code, errOut)
	}
	waitLine(t, sc, `heard: also lint`)
	if code, _, errOut := cli(t, "ok", "interrupt", id); code != ExitOK || !strings.Contains(errOut, "--session") {
		t.Fatalf("interrupt: %d %s", code, errOut)
	}
	rest = drain(sc)
	var ee *exec.ExitError
	if err := owner.Wait(); !errors.As(err, &ee) || ee.ExitCode() != ExitFailure {
		t.Fatalf("owner after an interrupt: %v", err)
	}
	if !strings.Contains(rest, `"status":"interrupted"`) {
		t.Fatalf("owner's last events:\n%s", rest)
	}
	if s := showRun(t, id); s.Run.Error != store.ReasonInterrupted || s.Run.ResumeToken == "" {
		t.Fatalf("run %+v: interrupted, its session kept", s.Run)
	}
	assertGone(t, pidOf(t, pidfile))
	if code, _, errOut := cli(t, "ok", "steer", id, "hello?"); code == ExitOK || !strings.Contains(errOut, "not running") {
		t.Fatalf("steer after the end: %d %s", code, errOut)
	}
}

// RUN-6: a drover killed with SIGKILL while a request waits for an answer
// leaves a run the next drover marks failed "engine restart", with no
// agent process left.
func TestRUN6_KilledWhileAsking(t *testing.T) {
	bin := buildDrover(t)
	db := filepath.Join(t.TempDir(), "drover.db")
	t.Setenv("DROVER_DB", db)
	owner, sc, stderr, pidfile := startDrover(t, bin, db, "ask", "run", "--json", "-a", "claude", "--approval-timeout", "10m", "build it")
	waitLine(t, sc, `"type":"permission_request"`)
	id := runIDRe.FindStringSubmatch(stderr.String())[1]
	agent := pidOf(t, pidfile)
	owner.Process.Kill()
	owner.Wait()
	if code, _, errOut := cli(t, "ok", "ps"); code != ExitOK {
		t.Fatalf("ps: %s", errOut)
	}
	if s := showRun(t, id); s.Run.Status != store.StatusFailed || s.Run.Error != store.ReasonEngineRestart || len(s.Pending) != 0 {
		t.Fatalf("after restart: %+v pending %+v", s.Run, s.Pending)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(agent, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the agent process %d survived reconciliation", agent)
		}
	}
	if code, _, errOut := cli(t, "ok", "approve", id); code == ExitOK || !strings.Contains(errOut, "not running") {
		t.Fatalf("approve after the owner died: %d %s", code, errOut)
	}
}

// waitLine reads sc until a line contains want.
func waitLine(t *testing.T, sc interface {
	Scan() bool
	Text() string
}, want string) string {
	t.Helper()
	for sc.Scan() {
		if strings.Contains(sc.Text(), want) {
			return sc.Text()
		}
	}
	t.Fatalf("output ended without %q", want)
	return ""
}

// drain reads sc to its end.
func drain(sc interface {
	Scan() bool
	Text() string
}) string {
	var b strings.Builder
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

func pidOf(t *testing.T, pidfile string) int {
	t.Helper()
	data, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	json.Unmarshal(data, &pid)
	return pid
}
