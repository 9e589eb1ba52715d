package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/uestest"
	"go.uber.org/goleak"
)

// fakeEnv switches the test binary into a fake `claude` that misbehaves on
// purpose; the CLI finds it through DROVER_CLAUDE_BIN.
const fakeEnv = "DROVER_TEST_FAKE_CLAUDE"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		fakeClaude(mode)
		os.Exit(0)
	}
	// Every test records into a throwaway ledger and state directory,
	// never the user's.
	tmp, err := os.MkdirTemp("", "drover-cli-test")
	if err != nil {
		panic(err)
	}
	os.Setenv("DROVER_DB", filepath.Join(tmp, "drover.db"))
	os.Setenv("XDG_STATE_HOME", tmp)
	code := m.Run()
	os.RemoveAll(tmp)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

const (
	initLine   = `{"type":"system","subtype":"init","cwd":"/w","session_id":"11111111-2222-4333-8444-555555555555","tools":["Bash"],"model":"fake"}`
	resultLine = `{"type":"result","subtype":"success","is_error":false,"duration_ms":5,"num_turns":1,"result":"ok","session_id":"11111111-2222-4333-8444-555555555555","total_cost_usd":0.001,"usage":{"input_tokens":3,"output_tokens":2}}`
)

func textLine(s string) string {
	b, _ := json.Marshal(s)
	return `{"type":"assistant","message":{"id":"m","content":[{"type":"text","text":` + string(b) + `}]},"session_id":"11111111-2222-4333-8444-555555555555"}`
}

// fakeClaude is the body of the fake agent process.
func fakeClaude(mode string) {
	if f := os.Getenv("FAKE_PIDFILE"); f != "" {
		os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o644)
	}
	w := bufio.NewWriter(os.Stdout)
	out := func(lines ...string) {
		for _, l := range lines {
			w.WriteString(l + "\n")
		}
		w.Flush()
	}
	switch mode {
	case "ok":
		out(initLine, textLine("hello"), resultLine)
	case "no-result":
		out(initLine, textLine("partial answer"))
	case "crash":
		out(initLine)
		fmt.Fprintln(os.Stderr, "fatal: the fake agent crashed on purpose")
		os.Exit(3)
	case "huge":
		out(initLine, textLine(strings.Repeat("x", 16<<20)), resultLine)
	case "garbage":
		out("not json at all", initLine, "{broken json", "\x00\x01\x02", `["an","array"]`, textLine("still here"), "", resultLine, "trailing garbage")
	case "hang":
		// Ignores SIGTERM so that only the group SIGKILL can end it.
		signalIgnoreTerm()
		out(initLine)
		time.Sleep(time.Hour)
	case "drip": // init, then a text every 20 ms until killed
		out(initLine)
		for i := 0; ; i++ {
			out(textLine(fmt.Sprintf("drip %d", i)))
			time.Sleep(20 * time.Millisecond)
		}
	case "slow-then-ok":
		out(initLine)
		for range 5 {
			time.Sleep(100 * time.Millisecond)
			out(`{"type":"system","subtype":"status","status":"thinking"}`)
		}
		out(textLine("done slowly"), resultLine)
	}
}

// runCLI runs drover in-process with the fake agent in mode.
func runCLI(t *testing.T, ctx context.Context, mode string, args ...string) (code int, stdout, stderr string, pid int) {
	t.Helper()
	return runCLIPidfile(t, ctx, filepath.Join(t.TempDir(), "pid"), mode, args...)
}

// runCLIPidfile is runCLI with the fake agent's pid file at pidfile.
func runCLIPidfile(t *testing.T, ctx context.Context, pidfile, mode string, args ...string) (code int, stdout, stderr string, pid int) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, mode)
	t.Setenv("FAKE_PIDFILE", pidfile)
	// A race-enabled fake would otherwise sleep 1 s at exit.
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	var out, errb bytes.Buffer
	code = Run(ctx, args, strings.NewReader(""), &out, &errb)
	if data, err := os.ReadFile(pidfile); err == nil {
		pid, _ = strconv.Atoi(string(data))
	}
	return code, out.String(), errb.String(), pid
}

func decodeEvents(t *testing.T, stdout string) []drover.Event {
	t.Helper()
	var evs []drover.Event
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var ev drover.Event
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("stdout line is not a UES event: %.200q: %v", sc.Text(), err)
		}
		if !drover.IsAgentEvent(ev) {
			t.Fatalf("invalid event on stdout: %.200s", sc.Text())
		}
		evs = append(evs, ev)
	}
	return evs
}

// lastDone asserts exactly one done, last, and returns it.
func lastDone(t *testing.T, evs []drover.Event) drover.DonePayload {
	t.Helper()
	d, err := uestest.OneDoneLast(evs)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func findError(evs []drover.Event) (drover.ErrorPayload, bool) {
	for _, ev := range evs {
		if p, ok := ev.Payload.(drover.ErrorPayload); ok {
			return p, true
		}
	}
	return drover.ErrorPayload{}, false
}

func assertGone(t *testing.T, pid int) {
	t.Helper()
	if pid <= 0 {
		t.Fatal("fake agent never started (no pid recorded)")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("agent process %d is still alive after the run", pid)
	}
}

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
			assertGone(t, pid)
		})
	}
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

func TestCLI_UsageErrors(t *testing.T) {
	cases := [][]string{
		{"run", "hello"},                                  // no agent
		{"run", "-a", "nope", "hello"},                    // unknown agent
		{"run", "-a", "claude"},                           // no prompt
		{"run", "-a", "claude", "--tier", "yolo", "x"},    // bad tier
		{"run", "-a", "claude", "--max-turns", "-2", "x"}, // invalid option
		{"run", "-a", "claude", "--cwd", "/nonexistent", "x"},
		{"run", "-a", "claude", "--bogus-flag", "x"},
		{"frobnicate"},
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, strings.NewReader(""), &out, &errb); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		if out.Len() != 0 {
			t.Errorf("%v: usage error wrote to stdout: %q", args, out.String())
		}
		if !strings.Contains(errb.String(), "drover:") {
			t.Errorf("%v: no error message on stderr", args)
		}
	}
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
	for _, want := range []string{"● claude-code · fake", "hello", "■ success", "3 in / 2 out tokens", "resume 11111111-2222-4333-8444-555555555555"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("human view lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "\x1b[") {
		t.Error("colour codes written to a non-terminal")
	}
}

func TestCLI_MissingBinaryIsolatedInParallel(t *testing.T) {
	// One run's binary is missing (an explicit bad path), the other works.
	self, _ := os.Executable()
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
	_ = self
}

func TestCLI_AgentsLists(t *testing.T) {
	self, _ := os.Executable()
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, "version")
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"agents", "--json"}, strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var row struct {
		ID        string `json:"id"`
		Installed bool   `json:"installed"`
		Path      string `json:"path"`
		Tested    bool   `json:"tested"`
	}
	ids := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		ids[row.ID] = true
		if row.ID == "claude-code" && (!row.Installed || row.Path != self || row.Tested) {
			t.Fatalf("claude row %+v", row)
		}
	}
	for _, id := range []string{"claude-code", "codex", "gemini"} {
		if !ids[id] {
			t.Errorf("drover agents lacks %s", id)
		}
	}
}

func signalIgnoreTerm() { signalIgnore(syscall.SIGTERM) }

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

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
	bin := filepath.Join(t.TempDir(), "drover")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/drover-run/drover/cmd/drover").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
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
