package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store/sqlite"
)

func TestADP1_MisbehavingAgentsThroughCLI(t *testing.T) {
	cases := []struct {
		mode    string
		args    []string
		code    int
		status  drover.DoneStatus
		errCode drover.ErrorCode
		check   func(t *testing.T, evs []drover.Event, stderr string)
	}{
		{mode: "ok", code: ExitOK, status: drover.StatusSuccess},
		{mode: "no-result", code: ExitFailure, status: drover.StatusError, errCode: drover.CodeMissingDone},
		{mode: "crash", code: ExitFailure, status: drover.StatusError, errCode: drover.CodeProcessExit,
			check: func(t *testing.T, evs []drover.Event, _ string) {
				if p, _ := findError(evs); !strings.Contains(p.Message, "crashed on purpose") || !strings.Contains(p.Message, "exit status 3") {
					t.Fatalf("error message lacks stderr tail / exit status: %q", p.Message)
				}
			}},
		{mode: "huge", code: ExitOK, status: drover.StatusSuccess,
			check: func(t *testing.T, evs []drover.Event, _ string) {
				for _, ev := range evs {
					if p, ok := ev.Payload.(drover.TextPayload); ok && len(p.Content) == 16<<20 {
						return
					}
				}
				t.Fatal("the 16 MiB text did not arrive intact")
			}},
		{mode: "garbage", code: ExitOK, status: drover.StatusSuccess,
			check: func(t *testing.T, evs []drover.Event, _ string) {
				var texts []string
				for _, ev := range evs {
					if p, ok := ev.Payload.(drover.TextPayload); ok {
						texts = append(texts, p.Content)
					}
				}
				if len(texts) != 1 || texts[0] != "still here" {
					t.Fatalf("texts %q", texts)
				}
			}},
		{mode: "hang", args: []string{"--timeout", "500ms"}, code: ExitFailure, status: drover.StatusError, errCode: drover.CodeTimeout},
		{mode: "hang", args: []string{"--idle-timeout", "400ms"}, code: ExitFailure, status: drover.StatusError, errCode: drover.CodeIdleTimeout},
		{mode: "slow-then-ok", args: []string{"--idle-timeout", "2s"}, code: ExitOK, status: drover.StatusSuccess},
	}
	for _, c := range cases {
		t.Run(c.mode+strings.Join(c.args, ""), func(t *testing.T) {
			args := append([]string{"run", "--json", "-a", "claude"}, c.args...)
			args = append(args, "do the thing")
			code, stdout, stderr, pid := runCLI(t, context.Background(), c.mode, args...)
			if code != c.code {
				t.Errorf("exit %d, want %d; stderr %q", code, c.code, stderr)
			}
			evs := decodeEvents(t, stdout)
			if d := lastDone(t, evs); d.Status != c.status {
				t.Errorf("done %s, want %s", d.Status, c.status)
			}
			if p, ok := findError(evs); ok && c.errCode == "" {
				t.Errorf("unexpected error event: %+v", p)
			}
			if c.errCode != "" {
				if p, ok := findError(evs); !ok || p.Code != c.errCode {
					t.Errorf("error %+v, want code %s", p, c.errCode)
				}
			}
			if c.check != nil {
				c.check(t, evs, stderr)
			}
			if pid == 0 && c.mode == "hang" {
				// A timeout may end the run before the fake got as far as
				// writing its pid (a loaded machine starting a race-enabled
				// binary): the process drover started is in the ledger.
				pid = recordedPid(t, evs)
			}
			assertGone(t, pid)
		})
	}
}

// recordedPid is the pid the ledger ($DROVER_DB) holds for the run of evs.
func recordedPid(t *testing.T, evs []drover.Event) int {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events: no run to look up")
	}
	st, err := sqlite.Open(context.Background(), os.Getenv("DROVER_DB"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.GetRun(context.Background(), evs[0].RunID)
	if err != nil {
		t.Fatal(err)
	}
	return r.Pid
}

func TestCLI_InterruptExits130(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The signal comes once a fake agent is running (it writes its pid
	// file), however slow the machine; runCLI points FAKE_PIDFILE there.
	pidfile := filepath.Join(t.TempDir(), "pid")
	go func() {
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if b, err := os.ReadFile(pidfile); err == nil && len(b) > 0 {
				break
			}
		}
		cancel()
	}()
	code, stdout, _, pid := runCLIPidfile(t, ctx, pidfile, "hang", "run", "--json", "-a", "claude", "-a", "claude", "wait")
	if code != ExitInterrupted {
		t.Fatalf("exit %d, want 130", code)
	}
	evs := decodeEvents(t, stdout)
	per := map[string][]drover.Event{}
	for _, ev := range evs {
		per[ev.RunID] = append(per[ev.RunID], ev)
	}
	if len(per) != 2 {
		t.Fatalf("want 2 runs, got %d: %v", len(per), per)
	}
	for id, evs := range per {
		if d := lastDone(t, evs); d.Status != drover.StatusInterrupted {
			t.Fatalf("%s: %s", id, d.Status)
		}
	}
	assertGone(t, pid)
}

func TestCLI_PromptFromStdin(t *testing.T) {
	self, _ := os.Executable()
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, "ok")
	for _, args := range [][]string{{"run", "--json", "-a", "claude", "-"}, {"run", "--json", "-a", "claude"}} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, strings.NewReader("prompt from a pipe"), &out, &errb); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", args, code, errb.String())
		}
	}
}

func TestCLI_HumanView(t *testing.T) {
	code, stdout, _, _ := runCLI(t, context.Background(), "ok", "run", "-a", "claude", "hi")
	if code != ExitOK {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"● claude-code · fake", "hello", "■ completed", "3 in / 2 out tokens", "resume 11111111-2222-4333-8444-555555555555"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("human view lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Error("colour codes written to a non-terminal")
	}
}

// TestCLI_MissingBinaryIsReported: an agent binary that is not there (an
// explicit bad path) ends the run with NOT_INSTALLED naming the variable.
func TestCLI_MissingBinaryIsReported(t *testing.T) {
	t.Setenv(fakeEnv, "ok")
	t.Setenv("DROVER_CLAUDE_BIN", filepath.Join(t.TempDir(), "no-such-claude"))
	var out, errb bytes.Buffer
	code := Run(context.Background(), []string{"run", "--json", "-a", "claude", "hi"}, strings.NewReader(""), &out, &errb)
	if code != ExitFailure {
		t.Fatalf("exit %d", code)
	}
	evs := decodeEvents(t, out.String())
	lastDone(t, evs)
	if p, ok := findError(evs); !ok || p.Code != drover.CodeNotInstalled || !strings.Contains(p.Message, "DROVER_CLAUDE_BIN") {
		t.Fatalf("error %+v", p)
	}
}

// TestADP7_ParallelRunsGetOwnHomes: --isolate gives each run a new home,
// and parallel runs under one --config-dir get one subdirectory each.
func TestADP7_ParallelRunsGetOwnHomes(t *testing.T) {
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	code, _, stderr, _ := runCLI(t, context.Background(), "ok", "run", "--json", "--isolate", "-a", "claude", "-a", "claude", "hi")
	if code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	homes, _ := filepath.Glob(filepath.Join(state, "drover", "homes", "claude-*"))
	if len(homes) != 2 || !strings.Contains(stderr, homes[0]) || !strings.Contains(stderr, homes[1]) {
		t.Fatalf("homes %v, stderr %q", homes, stderr)
	}
	shared := t.TempDir()
	if code, _, stderr, _ := runCLI(t, context.Background(), "ok", "run", "--json", "--config-dir", shared, "-a", "claude", "-a", "claude", "hi"); code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, sub := range []string{"claude#1", "claude#2"} {
		if st, err := os.Stat(filepath.Join(shared, sub)); err != nil || !st.IsDir() {
			t.Fatalf("no own home %s: %v", sub, err)
		}
	}
}

// TestCLI_SecondInterruptKills: the first SIGINT asks the agent to stop
// (SIGTERM, which this fake ignores); the second kills its group at once.
// The run still ends with done{interrupted} and exit 130.
func TestCLI_SecondInterruptKills(t *testing.T) {
	bin := buildDrover(t)
	self, _ := os.Executable()
	cmd := exec.Command(bin, "run", "--json", "-a", "claude", "wait forever")
	cmd.Env = append(os.Environ(), "DROVER_CLAUDE_BIN="+self, fakeEnv+"=hang", "GORACE=atexit_sleep_ms=0")
	var stderr syncBuffer
	cmd.Stderr = &stderr
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var last string
	for sc.Scan() {
		last = sc.Text()
		if strings.Contains(last, `"type":"init"`) {
			cmd.Process.Signal(syscall.SIGINT)
			time.Sleep(200 * time.Millisecond)
			cmd.Process.Signal(syscall.SIGINT)
		}
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != ExitInterrupted {
		t.Fatalf("exit %v, want 130; stderr %q", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), "killed 1 agent process group") {
		t.Fatalf("second SIGINT did not kill: stderr %q", stderr.String())
	}
	if !strings.Contains(last, `"status":"interrupted"`) {
		t.Fatalf("last line %s", last)
	}
}

// TestCLI_RefusedRunLeavesNoTrace: an invocation refused as a usage error
// exits 2 before anything is created: no configuration homes, no ledger,
// no fakemodel server, in an empty state directory or one with a ledger.
// Commands about recorded runs do not create a ledger to find none there.
func TestCLI_RefusedRunLeavesNoTrace(t *testing.T) {
	t.Setenv("DROVER_DB", "") // the ledger in the state directory
	refused := [][]string{
		{"run", "--isolate", "--session", "BAD", "-a", "claude", "x"},
		{"run", "--isolate", "--fork", "run_nope", "-a", "claude", "x"},
		{"run", "--isolate", "--config-dir", "/tmp/somewhere", "-a", "claude", "x"},
		{"run", "--isolate", "--session", "s", "--resume", "r", "-a", "claude", "x"},
		{"run", "--isolate", "--session", "s", "--fork", "run_x", "-a", "claude", "x"},
		{"run", "--isolate", "-a", "claude", "-a", "nope", "x"},
		{"run", "--isolate", "--tier", "yolo", "-a", "claude", "x"},
		{"run", "--isolate", "--cwd", "/nonexistent", "-a", "claude", "x"},
		{"run", "--isolate", "--max-turns", "-2", "-a", "claude", "x"},
		{"run", "--isolate", "--max-budget-usd", "1", "--model", "mystery-9", "-a", "codex", "x"}, // no price for the model
		{"run", "--isolate", "--system-prompt", "be brief", "-a", "claude", "-a", "gemini", "x"},  // unsupported by gemini
		{"run", "--isolate", "--fakemodel", "--session", "BAD", "-a", "claude", "x"},
		{"run", "--isolate", "--fakemodel-script", "/nonexistent.json", "-a", "claude", "x"},
		{"serve", "--fakemodel", "--stdio", "--addr", "127.0.0.1:0"},
		{"serve", "--fakemodel", "--addr", "0.0.0.0:0", "--token", ""},
		{"logs", "run_nope"},
		{"wait", "run_nope"},
		{"cancel", "run_nope"},
	}
	check := func(t *testing.T, state string, args []string) {
		t.Helper()
		before := listTree(t, state)
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		if after := listTree(t, state); !slices.Equal(after, before) {
			t.Errorf("%v: the state directory changed: %q → %q", args, before, after)
		}
		if strings.Contains(errb.String(), "fakemodel at") {
			t.Errorf("%v: started a fakemodel: %q", args, errb.String())
		}
	}
	t.Run("empty", func(t *testing.T) {
		state := t.TempDir()
		t.Setenv("XDG_STATE_HOME", state)
		for _, args := range refused {
			check(t, state, args)
		}
	})
	t.Run("ledger", func(t *testing.T) {
		state := t.TempDir()
		t.Setenv("XDG_STATE_HOME", state)
		if err := os.MkdirAll(filepath.Join(state, "drover"), 0o700); err != nil {
			t.Fatal(err)
		}
		st, err := sqlite.Open(context.Background(), filepath.Join(state, "drover", "drover.db"))
		if err != nil {
			t.Fatal(err)
		}
		st.Close()
		for _, args := range refused {
			check(t, state, args)
		}
	})
}

// listTree lists the paths under dir, relative to it.
func listTree(t *testing.T, dir string) []string {
	t.Helper()
	var paths []string
	err := filepath.WalkDir(dir, func(p string, _ fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(dir, p)
		paths = append(paths, rel)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return paths
}
