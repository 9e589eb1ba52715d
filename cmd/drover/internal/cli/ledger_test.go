package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

var runIDRe = regexp.MustCompile(`run (run_[0-9a-f]+)`)

// cli runs drover in-process against the fake agent and returns exit code,
// stdout, stderr.
func cli(t *testing.T, mode string, args ...string) (int, string, string) {
	t.Helper()
	self, _ := os.Executable()
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, mode)
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func TestLED5_RunIsRecordedAndQueryable(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	code, stdout, stderr := cli(t, "ok", "run", "--json", "-a", "claude", "say hello")
	if code != ExitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	m := runIDRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("run id not printed on stderr: %q", stderr)
	}
	id := m[1]
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		if !strings.Contains(l, `"runId":"`+id+`"`) || !strings.Contains(l, `"seq":`) {
			t.Fatalf("event without runId/seq: %s", l)
		}
	}
	// logs prints exactly what run printed.
	if code, logs, _ := cli(t, "ok", "logs", "--json", id); code != ExitOK || logs != stdout {
		t.Fatalf("logs differ from the run's output:\n%s\nvs\n%s", logs, stdout)
	}
	var ps []store.Run
	code, psOut, psErr := cli(t, "ok", "ps", "--json")
	if code != ExitOK {
		t.Fatalf("ps --json: exit %d: %s", code, psErr)
	}
	for _, l := range strings.Split(strings.TrimSpace(psOut), "\n") {
		var r store.Run
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("ps line %q: %v", l, err)
		}
		ps = append(ps, r)
	}
	if len(ps) != 1 || ps[0].ID != id || ps[0].Status != store.StatusCompleted || ps[0].Usage.InputTokens != 3 {
		t.Fatalf("ps %+v", ps)
	}
	code, show, stderr := cli(t, "ok", "show", id)
	if code != ExitOK {
		t.Fatalf("show: exit %d: %s\n%s", code, stderr, show)
	}
	for _, want := range []string{"status    completed", "3 in / 2 out tokens", "cost      $0.0010", "[user] say hello", "[assistant] hello"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if code, out, _ := cli(t, "ok", "wait", id); code != ExitOK || !strings.Contains(out, id+" completed") {
		t.Fatalf("wait: %d %q", code, out)
	}
	// A second run continues the session.
	session := ps[0].SessionID
	code, _, stderr = cli(t, "ok", "run", "--json", "--session", session, "-a", "claude", "again")
	if code != ExitOK {
		t.Fatalf("run --session: %s", stderr)
	}
	second := runIDRe.FindStringSubmatch(stderr)[1]
	_, sess, _ := cli(t, "ok", "sessions", "--json")
	var s store.Session
	json.Unmarshal([]byte(strings.Split(sess, "\n")[0]), &s)
	if s.ID != session || s.HeadRunID != second || len(s.Heads) != 1 || s.Heads[0] != id {
		t.Fatalf("session %+v", s)
	}
	for _, args := range [][]string{{"show", "run_nope"}, {"logs", "run_nope"}, {"wait", "run_nope"}, {"run", "--session", "nope", "-a", "claude", "x"}} {
		if code, _, errOut := cli(t, "ok", args...); code != ExitUsage || !strings.Contains(errOut, "drover:") {
			t.Errorf("%v: exit %d %q", args, code, errOut)
		}
	}
}

func buildDrover(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "drover")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/drover-run/drover/cmd/drover").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	return bin
}

// startDrover starts the real binary with the fake agent in mode.
func startDrover(t *testing.T, bin, db, mode string, args ...string) (*exec.Cmd, *bufio.Scanner, *syncBuffer, string) {
	t.Helper()
	self, _ := os.Executable()
	pidfile := filepath.Join(t.TempDir(), "pid")
	cmd := exec.Command(bin, args...)
	// The run's workspace holds the pid file: a run is contained to its
	// workspace by default (SEC-2).
	cmd.Dir = filepath.Dir(pidfile)
	cmd.Env = append(os.Environ(), "DROVER_CLAUDE_BIN="+self, fakeEnv+"="+mode, "FAKE_PIDFILE="+pidfile,
		"GORACE=atexit_sleep_ms=0", "DROVER_DB="+db)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 1<<20)
	return cmd, sc, stderr, pidfile
}

// TestRUN6_KillDashNineThenRestart: drover run is killed with SIGKILL
// mid-run; the next drover marks the run failed "engine restart", kills the
// agent's process group, and every event drover had printed is in the
// ledger. Loss window: none for printed events — drover prints an event
// only after the ledger has committed it.
func TestRUN6_KillDashNineThenRestart(t *testing.T) {
	bin := buildDrover(t)
	db := filepath.Join(t.TempDir(), "drover.db")
	cmd, sc, stderr, pidfile := startDrover(t, bin, db, "drip", "run", "--json", "-a", "claude", "drip forever")
	var printed []string
	for sc.Scan() {
		printed = append(printed, sc.Text())
		if len(printed) == 10 {
			cmd.Process.Kill()
			break
		}
	}
	cmd.Wait()
	id := runIDRe.FindStringSubmatch(stderr.String())[1]
	data, _ := os.ReadFile(pidfile)
	var agentPid int
	json.Unmarshal(data, &agentPid)
	if agentPid == 0 || syscall.Kill(agentPid, 0) != nil {
		t.Fatalf("the agent (pid %d) should have outlived the killed drover", agentPid)
	}

	// "Start drover again": any ledger command reconciles.
	t.Setenv("DROVER_DB", db)
	if code, _, errOut := cli(t, "ok", "ps"); code != ExitOK {
		t.Fatalf("ps: %s", errOut)
	}
	code, out, _ := cli(t, "ok", "show", "--json", id)
	var shown struct{ Run store.Run }
	json.Unmarshal([]byte(out), &shown)
	if code != ExitOK || shown.Run.Status != store.StatusFailed || shown.Run.Error != store.ReasonEngineRestart {
		t.Fatalf("after restart: %d %+v", code, shown.Run)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(agentPid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the agent process %d survived reconciliation", agentPid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_, logs, _ := cli(t, "ok", "logs", "--json", id)
	ledger := strings.Split(strings.TrimSpace(logs), "\n")
	if len(ledger) < len(printed) {
		t.Fatalf("ledger has %d events, drover printed %d", len(ledger), len(printed))
	}
	for i, l := range printed {
		if ledger[i] != l {
			t.Fatalf("printed event %d not in the ledger:\n%s\n%s", i, l, ledger[i])
		}
	}
}

// TestRUN3_CancelFromAnotherProcess: drover cancel in one process stops a
// run owned by another drover process, within a second or so.
func TestRUN3_CancelFromAnotherProcess(t *testing.T) {
	bin := buildDrover(t)
	db := filepath.Join(t.TempDir(), "drover.db")
	cmd, sc, stderr, _ := startDrover(t, bin, db, "hang", "run", "--json", "-a", "claude", "wait")
	for sc.Scan() {
		if strings.Contains(sc.Text(), `"type":"init"`) {
			break
		}
	}
	id := runIDRe.FindStringSubmatch(stderr.String())[1]
	t.Setenv("DROVER_DB", db)
	start := time.Now()
	if code, _, errOut := cli(t, "ok", "cancel", id); code != ExitOK {
		t.Fatalf("cancel: %s", errOut)
	}
	var last string
	for sc.Scan() {
		last = sc.Text()
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitFailure {
		t.Fatalf("owner exit %v", err)
	}
	if !strings.Contains(last, `"status":"interrupted"`) {
		t.Fatalf("last event %s", last)
	}
	_, out, _ := cli(t, "ok", "wait", "--json", id)
	var r store.Run
	json.Unmarshal([]byte(out), &r)
	if r.Status != store.StatusFailed || r.Error != store.ReasonCancelled {
		t.Fatalf("run %+v", r)
	}
	t.Logf("cancelled across processes in %s (the fake ignores SIGTERM: includes the 3 s kill grace)", time.Since(start))
}

// TestLED2_LogsFollowFromAnotherProcess: `drover logs -f` in one process
// follows a live run owned by another drover process to its end, printing
// exactly what the owner prints.
func TestLED2_LogsFollowFromAnotherProcess(t *testing.T) {
	bin := buildDrover(t)
	db := filepath.Join(t.TempDir(), "drover.db")
	cmd, sc, stderr, _ := startDrover(t, bin, db, "slow-then-ok", "run", "--json", "-a", "claude", "take a moment")
	var owner []string
	if sc.Scan() {
		owner = append(owner, sc.Text()) // init: the run is live
	}
	id := runIDRe.FindStringSubmatch(stderr.String())[1]
	t.Setenv("DROVER_DB", db)
	code, followed, errOut := cli(t, "ok", "logs", "-f", "--json", id)
	for sc.Scan() {
		owner = append(owner, sc.Text())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("owner: %v", err)
	}
	if code != ExitOK {
		t.Fatalf("logs -f: %d %s", code, errOut)
	}
	if got := strings.Split(strings.TrimSpace(followed), "\n"); strings.Join(got, "\n") != strings.Join(owner, "\n") {
		t.Fatalf("followed %d events, owner printed %d:\n%s\n--\n%s", len(got), len(owner), followed, strings.Join(owner, "\n"))
	}
	if !strings.Contains(owner[len(owner)-1], `"type":"done"`) {
		t.Fatalf("owner's last line %s", owner[len(owner)-1])
	}
}
