//go:build linux

package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/ptytest"
)

// screen is what a pseudo-terminal's master end has read of what drover
// wrote to its terminal, and the keyboard of that terminal.
type screen struct {
	master *os.File
	mu     sync.Mutex
	buf    bytes.Buffer
	grew   chan struct{} // signalled at each read
	done   chan struct{}
}

// newScreen reads tty's output from master until the test ends.
func newScreen(t *testing.T, master *os.File) *screen {
	s := &screen{master: master, grew: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		b := make([]byte, 4096)
		for {
			n, err := master.Read(b)
			s.mu.Lock()
			s.buf.Write(b[:n])
			s.mu.Unlock()
			select {
			case s.grew <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	// The reader is owned by the test: closing the master ends its Read.
	t.Cleanup(func() {
		master.Close()
		<-s.done
	})
	return s
}

func (s *screen) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// waitFor waits until the screen holds n occurrences of want.
func (s *screen) waitFor(t *testing.T, want string, n int) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for strings.Count(s.String(), want) < n {
		select {
		case <-s.grew:
		case <-deadline:
			t.Fatalf("the terminal never showed %q %d times:\n%s", want, n, s.String())
		}
	}
}

// typeLine types line and Enter at the terminal.
func (s *screen) typeLine(t *testing.T, line string) {
	t.Helper()
	if _, err := s.master.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
}

// runOnPTY runs drover in-process, as runCLI does, with a pseudo-terminal
// as its stdin and stdout; keys, when given, is called with the screen
// while drover runs (to answer its questions). It returns the exit status,
// everything the terminal showed and stderr.
func runOnPTY(t *testing.T, ctx context.Context, mode string, keys func(*screen), args ...string) (int, string, string) {
	t.Helper()
	master, tty := ptytest.Pair(t)
	s := newScreen(t, master)
	dir := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, mode)
	t.Setenv("FAKE_PIDFILE", filepath.Join(dir, "pid"))
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	t.Chdir(dir)
	var keysDone sync.WaitGroup
	if keys != nil {
		keysDone.Go(func() { keys(s) })
	}
	var errb bytes.Buffer
	code := Run(ctx, args, tty, tty, &errb)
	keysDone.Wait()
	// What drover wrote is in the terminal's queue: wait until it is read.
	mark := "\x00end-of-run\x00"
	tty.Write([]byte(mark))
	s.waitFor(t, mark, 1)
	return code, strings.ReplaceAll(s.String(), mark, ""), errb.String()
}

// CON-1: a session drover lists can be continued from a terminal, as
// `drover interrupt` suggests (drover run --session ID -a AGENT PROMPT).
func TestCON1_SessionOnATerminal(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	code, out, errOut, _ := runCLI(t, context.Background(), "ok", "run", "--json", "-a", "claude", "first")
	if code != ExitOK {
		t.Fatalf("first run: exit %d\n%s", code, errOut)
	}
	sid := decodeEvents(t, out)[0].SessionID
	code, _, errOut = runOnPTY(t, context.Background(), "ok", nil, "run", "--session", sid, "-a", "claude", "again")
	if code != ExitOK {
		t.Fatalf("drover run --session %s on a terminal: exit %d\n%s", sid, code, errOut)
	}
	if s := showRun(t, runIDRe.FindStringSubmatch(errOut)[1]); s.Run.SessionID != sid {
		t.Fatalf("the run continued session %q, want %q", s.Run.SessionID, sid)
	}
}

// CON-1: standard input from /dev/null is no terminal: nobody is asked,
// the request is denied at once (not after five minutes), and the summary
// says the call was denied.
func TestCON1_DevNullIsNoTerminal(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code, out, errOut, pid := runCLI(t, withStdin(ctx, null), "ask", "run", "-a", "claude", "build it")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, out, errOut)
	}
	assertGone(t, pid)
	if strings.Contains(out, "allow?") {
		t.Errorf("asked a question of /dev/null:\n%s", out)
	}
	for _, want := range []string{"denied Bash (drover (nobody could answer))", "1 tool call, 1 denied"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	s := showRun(t, runIDRe.FindStringSubmatch(errOut)[1])
	if p := s.ToolCalls[0].Permission; p == nil || p.By != drover.ByDefault {
		t.Fatalf("answered %+v, want denied at once by default", p)
	}
	if s.Run.Denied != 1 || s.Run.Outcome() != drover.OutcomeCompleted {
		t.Fatalf("ledger: denied %d, outcome %s; want 1, completed", s.Run.Denied, s.Run.Outcome())
	}
}

// CON-1: a call an --allow rule answers is not asked about on the
// terminal; the screen says the rule allowed it.
func TestCON1_RuleAnsweredCallIsNotAsked(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	code, screen, errOut := runOnPTY(t, context.Background(), "ask", nil, "run", "--allow", "Bash", "-a", "claude", "build it")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, screen, errOut)
	}
	if strings.Contains(screen, "allow?") || strings.Contains(screen, "wants to") {
		t.Errorf("asked about a call the rule answered:\n%s", screen)
	}
	for _, want := range []string{"allowed Bash (rule allow:Bash)", "■ completed", "1 tool call, 1 allowed"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, screen)
		}
	}
}

// CON-1: parallel runs asking at once: each request on its own line with
// its run and its own deadline as it comes, the question says how many
// more are waiting, and no other output ever lands on the question's line.
func TestCON1_ParallelPromptsOnATerminal(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	keys := func(s *screen) {
		s.waitFor(t, "wants to", 2)
		s.waitFor(t, "1 more waiting", 1)
		s.typeLine(t, "y")
		s.waitFor(t, "allowed Bash (terminal)", 1)
		s.typeLine(t, "n not today")
	}
	code, screen, errOut := runOnPTY(t, context.Background(), "ask", keys, "run", "-a", "claude", "-a", "claude", "build it")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s\n%s", code, screen, errOut)
	}
	for _, want := range []string{"[claude#1]   ? Bash wants to:", "[claude#2]   ? Bash wants to:", "denied Bash (terminal)"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal lacks %q:\n%s", want, screen)
		}
	}
	if n := len(regexp.MustCompile(`denied at \d\d:\d\d:\d\d \(in \d+m\d+s\)`).FindAllString(screen, -1)); n != 2 {
		t.Errorf("%d requests shown with their own deadline, want 2:\n%s", n, screen)
	}
	// What a person sees: carriage returns and line clears applied.
	for _, l := range visibleLines(screen) {
		if i := strings.Index(l, "allow?"); i >= 0 && strings.Contains(l[i:], "[claude#") {
			t.Errorf("output broke into a question: %q", l)
		}
	}
}

// visibleLines is what a terminal shows of out, line by line: a carriage
// return goes back to the line's start, "ESC [ K" clears what follows.
func visibleLines(out string) []string {
	var lines []string
	for raw := range strings.SplitSeq(strings.ReplaceAll(out, "\r\n", "\n"), "\n") {
		var line []rune
		col := 0
		for i := 0; i < len(raw); {
			switch {
			case raw[i] == '\r':
				col = 0
				i++
			case strings.HasPrefix(raw[i:], "\x1b[K"):
				line = line[:col]
				i += 3
			case raw[i] == '\x1b':
				j := strings.IndexAny(raw[i+1:], "ABCDEFGHJKSTfmhl")
				if j < 0 {
					j = len(raw) - i - 2
				}
				i += j + 2
			default:
				r := []rune(raw[i:])[0]
				if col < len(line) {
					line[col] = r
				} else {
					line = append(line, r)
				}
				col++
				i += len(string(r))
			}
		}
		lines = append(lines, string(line))
	}
	return lines
}

// CON-1: the first hour's rough edges. A ledger named in a directory that
// is not there is refused, and the directory is not made; --max-turns 0
// and -1 are refused in the flag's own words; only a command line drover
// cannot parse ends with the hint to see --help; a timeout is reported as
// asked, and the run's outcome is timed_out; "1 turn", not "1 turns".
func TestCON1_FirstHourErrors(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DROVER_DB", filepath.Join(dir, "drover.db"))
	// Before any ledger: an unknown run is a usage error, not a failure.
	if code, _, errOut, _ := runCLI(t, context.Background(), "ok", "show", "run_nope"); code != ExitUsage || !strings.Contains(errOut, `no run "run_nope"`) {
		t.Errorf("show run_nope with no ledger: exit %d, %s", code, errOut)
	}
	missing := filepath.Join(dir, "nonexistent", "sub")
	code, _, errOut, _ := runCLI(t, context.Background(), "ok", "run", "--db", filepath.Join(missing, "x.db"), "-a", "claude", "x")
	if code != ExitUsage || !strings.Contains(errOut, "does not exist") {
		t.Errorf("--db in a missing directory: exit %d, %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Dir(missing)); err == nil {
		t.Errorf("--db made the directory %s", filepath.Dir(missing))
	}
	for _, n := range []string{"0", "-1"} {
		code, _, errOut, _ := runCLI(t, context.Background(), "ok", "run", "--max-turns", n, "-a", "claude", "x")
		if code != ExitUsage || !strings.Contains(errOut, "--max-turns must be at least 1, got "+n) || strings.Contains(errOut, "maxTurns") {
			t.Errorf("--max-turns %s: exit %d, %s", n, code, errOut)
		}
	}
	code, _, errOut, _ = runCLI(t, context.Background(), "ok", "run", "--bogus-flag", "-a", "claude", "x")
	if code != ExitUsage || !strings.Contains(errOut, "Run 'drover --help' for usage.") {
		t.Errorf("an unknown flag: exit %d, %s", code, errOut)
	}
	code, out, errOut, _ := runCLI(t, context.Background(), "hang", "run", "--timeout", "300ms", "-a", "claude", "x")
	if code != ExitFailure || !strings.Contains(out, "timeout of 300ms") || !strings.Contains(out, "■ timed_out") {
		t.Errorf("--timeout 300ms: exit %d\n%s\n%s", code, out, errOut)
	}
	timedOut := runIDRe.FindStringSubmatch(errOut)[1]
	if s := showRun(t, timedOut); s.Run.Outcome() != drover.OutcomeTimedOut {
		t.Errorf("outcome %s, want timed_out", s.Run.Outcome())
	}
	// ps selects by outcome, in the same words.
	code, out, errOut, _ = runCLI(t, context.Background(), "ok", "ps", "--status", "timed_out", "--json")
	if code != ExitOK || strings.Count(out, "\n") != 1 || !strings.Contains(out, timedOut) || !strings.Contains(out, `"outcome":"timed_out"`) {
		t.Errorf("ps --status timed_out: exit %d\n%s\n%s", code, out, errOut)
	}
	if code, _, errOut, _ = runCLI(t, context.Background(), "ok", "ps", "--status", "finished"); code != ExitUsage || !strings.Contains(errOut, "timed_out") {
		t.Errorf("ps --status finished: exit %d, %s", code, errOut)
	}
	code, out, errOut, _ = runCLI(t, context.Background(), "ok", "run", "-a", "claude", "x")
	if code != ExitOK || !strings.Contains(out, " · 1 turn · ") {
		t.Errorf("exit %d, want '1 turn' in the summary\n%s\n%s", code, out, errOut)
	}
	code, _, errOut, _ = runCLI(t, context.Background(), "ok", "show", "run_nope")
	if code != ExitUsage || !strings.Contains(errOut, "no run") || strings.Contains(errOut, "--help") {
		t.Errorf("show run_nope: exit %d, %s", code, errOut)
	}
}

// ACC-2: drover prices lists the prices in force with their sources and
// says which entry prices a model; a model without one is said to have no
// price (exit 1), and a run of it ends "no price for MODEL", not $0.
func TestACC2_PricesInForce(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{"gpt-5": {"input": 2, "output": 20, "source": "our contract"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut, _ := runCLI(t, context.Background(), "ok", "prices", "--prices", file)
	if code != ExitOK || !regexp.MustCompile(`(?m)^gpt-5 +\$2 +\$20 .*--prices .*our contract$`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^gpt-5 +\$1\.25 .*not used.*openai\.com`).MatchString(out) {
		t.Fatalf("drover prices: exit %d\n%s\n%s", code, out, errOut)
	}
	code, out, _, _ = runCLI(t, context.Background(), "ok", "prices", "--prices", file, "gpt-5-2025-08-07", "mystery-9")
	if code != ExitFailure || !strings.Contains(out, `gpt-5-2025-08-07: $2 in / $20 out per million tokens, entry "gpt-5" of --prices`) ||
		!strings.Contains(out, "mystery-9: no price") {
		t.Fatalf("drover prices MODEL: exit %d\n%s", code, out)
	}
	h := &human{w: io.Discard, tallies: map[string]*tally{}}
	h.tally("r").model = "mystery-9"
	line := h.doneLine(drover.Event{RunID: "r"}, drover.DonePayload{Status: drover.StatusSuccess, Usage: drover.Usage{InputTokens: 10, OutputTokens: 5}})
	if !strings.Contains(line, "no price for mystery-9") || strings.Contains(line, "$") {
		t.Fatalf("summary %q", line)
	}
}
