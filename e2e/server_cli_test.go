package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// cliSide is one side of TestAPI2_CLIAgainstAServer: the drover command
// with the environment and flags that point it at its runs (a ledger of
// its own, or a server).
type cliSide struct {
	name  string
	bin   string
	env   []string
	flags []string // after the command name: --db, or nothing
	pre   []string // before it: --server URL, or nothing
	runs  []string // more flags of `run`: --fakemodel locally
	ws    string   // the runs' workspace
	home  string   // the home of the drover that runs the runs
	ids   map[string]string
}

// cmdResult is one command's output and exit status.
type cmdResult struct {
	stdout, stderr string
	code           int
}

func (s *cliSide) do(t *testing.T, args ...string) cmdResult {
	t.Helper()
	full := append(append(append([]string{}, s.pre...), args[0]), args[1:]...)
	if args[0] != "agents" {
		full = append(append(append(append([]string{}, s.pre...), args[0]), s.flags...), args[1:]...)
	}
	cmd := exec.Command(s.bin, full...)
	cmd.Env = s.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s: drover %v: %v", s.name, full, err)
	}
	return cmdResult{out.String(), errb.String(), code}
}

// normalized is text with what differs between two ledgers replaced:
// run and session ids (by order of first appearance), the workspace, tool
// call ids, times, durations and ages.
func (s *cliSide) normalized(text string) string {
	replace := func(re *regexp.Regexp, prefix string) {
		text = re.ReplaceAllStringFunc(text, func(id string) string {
			if _, ok := s.ids[id]; !ok {
				s.ids[id] = fmt.Sprintf("%s%d", prefix, len(s.ids)+1)
			}
			return s.ids[id]
		})
	}
	replace(regexp.MustCompile(`run_[0-9a-f]{11,}`), "RUN")
	replace(regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "UUID")
	text = strings.ReplaceAll(text, s.ws, "WS")
	if s.home != "" {
		text = strings.ReplaceAll(text, s.home, "HOME")
	}
	for _, r := range []struct{ re, with string }{
		{`"(pid|pgid)":\d+`, `"$1":0`},
		{`"owner":"[^"]*"`, `"owner":"OWNER"`},
		{`127\.0\.0\.1:\d+`, "127.0.0.1:PORT"},
		{`(toolu|call|msg|req)_[0-9A-Za-z]+`, "$1_ID"},
		{`"(timestamp|durationMs|askedAt|answeredAt|durationApiMs|duration_ms|duration_api_ms)":\d+`, `"$1":0`},
		{`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`, "TIME"},
		{`\b\d+(\.\d+)?(ms|µs|s|m|h)\b`, "DUR"},
		{`\b\d+(s|m|h|d) ago\b`, "AGO"},
		// A table's columns are as wide as their widest cell, which the
		// durations replaced above decide.
		{` {2,}`, "  "},
	} {
		text = regexp.MustCompile(r.re).ReplaceAllString(text, r.with)
	}
	return text
}

// TestAPI2_CLIAgainstAServer: every command of the CLI, run against a
// `drover serve --fakemodel` with a token (--server, DROVER_TOKEN), says
// what it says run locally, line for line — ids, times and paths aside —
// with the same exit status, the real Claude Code doing the work on both
// sides; and a server that cannot be reached, refuses the token or speaks
// another version of the API is one line, exit 2.
func TestAPI2_CLIAgainstAServer(t *testing.T) {
	claude := claudeBin(t)
	bin := buildDrover(t)
	base := append(os.Environ(), "DROVER_CLAUDE_BIN="+claude, "DROVER_SERVER=", "NO_COLOR=1")

	lhome := t.TempDir()
	local := &cliSide{name: "local", bin: bin, ws: t.TempDir(), home: lhome, ids: map[string]string{},
		env:   append(append([]string{}, base...), "HOME="+lhome, "XDG_STATE_HOME="+filepath.Join(lhome, "state"), "DROVER_TOKEN="),
		flags: []string{"--db", filepath.Join(lhome, "drover.db")}, runs: []string{"--fakemodel"}}

	rhome := t.TempDir()
	const token = "e2e-token-4f1d"
	url, _ := startServe(t, bin, append(append([]string{}, base...), "HOME="+rhome, "XDG_STATE_HOME="+filepath.Join(rhome, "state"), "DROVER_TOKEN="+token),
		regexp.MustCompile(`serving HTTP on (http://127\.0\.0\.1:\d+)`), "--db", filepath.Join(rhome, "drover.db"), "--token", token)
	remote := &cliSide{name: "remote", bin: bin, ws: t.TempDir(), home: rhome, ids: map[string]string{},
		env: append(append([]string{}, base...), "HOME="+t.TempDir(), "DROVER_TOKEN="+token), pre: []string{"--server", url}}

	same := func(what string, stderr bool, args func(s *cliSide) []string) (l, r cmdResult) {
		t.Helper()
		l, r = local.do(t, args(local)...), remote.do(t, args(remote)...)
		if l.code != r.code {
			t.Errorf("%s: exit %d locally, %d against the server\nlocal stderr: %s\nremote stderr: %s", what, l.code, r.code, l.stderr, r.stderr)
		}
		if lo, ro := local.normalized(l.stdout), remote.normalized(r.stdout); lo != ro {
			t.Errorf("%s: stdout differs\nlocal:\n%s\nremote:\n%s", what, lo, ro)
		}
		if le, re := local.normalized(l.stderr), remote.normalized(r.stderr); stderr && le != re {
			t.Errorf("%s: stderr differs\nlocal:\n%s\nremote:\n%s", what, le, re)
		}
		return l, r
	}
	prompt := "write hello.txt, then run ls"
	l, _ := same("run --json", true, func(s *cliSide) []string {
		return append(append([]string{"run", "--json", "--cwd", s.ws}, s.runs...), "-a", "claude", prompt)
	})
	if l.code != 0 || !strings.Contains(l.stdout, `"type":"done"`) {
		t.Fatalf("run --json locally: exit %d\n%s\n%s", l.code, l.stdout, l.stderr)
	}
	// The run of each side, by the id its run printed.
	runOf := func(s *cliSide, r cmdResult) string {
		m := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(r.stderr)
		if m == nil {
			t.Fatalf("%s: no run id in %q", s.name, r.stderr)
		}
		return m[1]
	}
	lrun, rrun := runOf(local, l), ""
	{
		r := remote.do(t, "ps", "--all", "--json")
		m := regexp.MustCompile(`"id":"(run_[0-9a-f]+)"`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("remote ps: %q %q", r.stdout, r.stderr)
		}
		rrun = m[1]
	}
	run := func(s *cliSide) string {
		if s == local {
			return lrun
		}
		return rrun
	}
	for _, ws := range []string{local.ws, remote.ws} {
		if data, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(data) != "hello from drover\n" {
			t.Fatalf("hello.txt in %s: %q %v", ws, data, err)
		}
		os.Remove(filepath.Join(ws, "hello.txt"))
	}
	same("run (the live view)", false, func(s *cliSide) []string {
		return append(append([]string{"run", "--cwd", s.ws}, s.runs...), "-a", "claude", prompt)
	})
	for _, c := range [][]string{
		{"ps", "--all"}, {"ps", "--all", "--json"}, {"ps", "--status", "completed", "--limit", "1"},
		{"show", "RUN"}, {"show", "--json", "RUN"},
		{"logs", "RUN"}, {"logs", "--json", "RUN"}, {"logs", "-f", "RUN"}, {"logs", "--after", "3", "RUN"},
		{"wait", "RUN"}, {"wait", "--json", "RUN"},
		{"sessions"}, {"sessions", "--json"},
		{"agents"},
		{"cancel", "RUN"},
		{"approve", "RUN"}, {"deny", "RUN", "-m", "no"}, {"steer", "RUN", "also", "this"}, {"interrupt", "RUN"},
		{"show", "run_nope"}, {"logs", "run_nope"}, {"wait", "run_nope"}, {"cancel", "run_nope"},
		{"run", "-a", "nope", "x"}, {"run", "--tier", "yolo", "-a", "claude", "x"}, {"run", "--session", "BAD", "-a", "claude", "x"},
		{"run", "--system-prompt", "be brief", "-a", "gemini", "x"},
	} {
		same(strings.Join(c, " "), true, func(s *cliSide) []string {
			args := append([]string{}, c...)
			for i, a := range args {
				if a == "RUN" {
					args[i] = run(s)
				}
			}
			return args
		})
	}

	// What only a server can fail at: one line, exit 2.
	oneLine := func(what string, r cmdResult, want string) {
		t.Helper()
		lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if r.code != 2 || len(lines) != 1 || !strings.Contains(lines[0], want) || r.stdout != "" {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want one line saying %q, exit 2", what, r.code, r.stdout, r.stderr, want)
		}
	}
	wrong := &cliSide{name: "wrong token", bin: bin, env: append(append([]string{}, base...), "DROVER_TOKEN=not-it"), pre: []string{"--server", url}}
	oneLine("a wrong token", wrong.do(t, "ps"), "refused the token")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	gone := &cliSide{name: "unreachable", bin: bin, env: base, pre: []string{"--server", closed}}
	oneLine("an unreachable server", gone.do(t, "ps"), "cannot reach the drover server")
	future := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"api":99,"drover":"v9.0.0"}`)
	}))
	defer future.Close()
	other := &cliSide{name: "incompatible", bin: bin, env: base, pre: []string{"--server", future.URL}}
	oneLine("a server of another version", other.do(t, "ps"), "speaks API version 99")
	if r := other.do(t, "ps", "--db", "x.db"); r.code != 2 || !strings.Contains(r.stderr, "--db and --server exclude each other") {
		t.Errorf("--server with --db: exit %d, %q", r.code, r.stderr)
	}
}

// startServe starts `drover serve --fakemodel --addr 127.0.0.1:0` with env
// and args and returns the first match of announce's group in what it
// says on stderr (its URL, the dashboard's address), and stop, which ends
// it (SIGTERM) and waits; the test's end stops it too.
func startServe(t *testing.T, bin string, env []string, announce *regexp.Regexp, args ...string) (string, func()) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--fakemodel", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	found := make(chan string, 1)
	exited := make(chan error, 1)
	var (
		logMu sync.Mutex
		log   strings.Builder
	)
	logged := func() string {
		logMu.Lock()
		defer logMu.Unlock()
		return log.String()
	}
	go func() {
		// Reads stderr to its end, so the child never blocks on it; the
		// test waits for this goroutine through exited.
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			logMu.Lock()
			log.WriteString(sc.Text() + "\n")
			logMu.Unlock()
			if m := announce.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
		io.Copy(io.Discard, stderr)
		exited <- cmd.Wait()
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}
	t.Cleanup(stop)
	select {
	case m := <-found:
		return m, stop
	case err := <-exited:
		stopped = true
		t.Fatalf("drover serve exited: %v\n%s", err, logged())
	case <-time.After(30 * time.Second):
		t.Fatalf("drover serve did not say %s:\n%s", announce, logged())
	}
	return "", stop
}
