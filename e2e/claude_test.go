// Package e2e runs the real vendor CLIs, pinned in package.json and
// installed by scripts/install-clis, through drover against fakemodel, offline.
//
// The tests run when DROVER_E2E=1 (CI sets it, through scripts/test); then a
// missing CLI is a failure, not a skip.
package e2e

import (
	"bufio"
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
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// claudeBin returns the pinned claude binary, skipping unless DROVER_E2E=1.
func claudeBin(t *testing.T) string {
	t.Helper()
	return vendorBin(t, "claude", "DROVER_CLAUDE_BIN")
}

// vendorBin returns a pinned vendor CLI from node_modules (or envVar),
// skipping unless DROVER_E2E=1; then a missing CLI fails the test.
func vendorBin(t *testing.T, name, envVar string) string {
	t.Helper()
	if os.Getenv("DROVER_E2E") != "1" {
		t.Skip("real-CLI test: set DROVER_E2E=1 (scripts/test does)")
	}
	if p := os.Getenv(envVar); p != "" {
		return p
	}
	p, err := filepath.Abs(filepath.Join("node_modules", ".bin", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("pinned %s not installed (run scripts/install-clis): %v", name, err)
	}
	return p
}

// world is one test's offline setup: a fakemodel, a workspace, a home.
type world struct {
	t     *testing.T
	bin   string
	fake  *fakemodel.Server
	url   string
	cwd   string
	home  string
	agent *claude.Adapter
}

func newWorld(t *testing.T, script string) *world {
	t.Helper()
	bin := claudeBin(t)
	s, err := fakemodel.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	fm := fakemodel.New(s)
	url, err := fm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Close() })
	w := &world{t: t, bin: bin, fake: fm, url: url, cwd: t.TempDir(), home: t.TempDir(), agent: claude.New()}
	return w
}

// opts are the options every run of w uses: offline, isolated, no retries.
func (w *world) opts() runOpts {
	zero := 0
	return runOpts{Options: drover.Options{
		Binary:     w.bin,
		Cwd:        w.cwd,
		Endpoint:   &drover.Endpoint{BaseURL: w.url, APIKey: "sk-fake"},
		APIRetries: &zero,
		ConfigDir:  filepath.Join(w.home, ".claude"),
		// The CLI must never see the real home, even for caches.
		Env:     map[string]string{"HOME": w.home},
		Timeout: 2 * time.Minute,
	}}
}

func (w *world) run(ctx context.Context, prompt string, o runOpts) []drover.Event {
	w.t.Helper()
	reg := drover.NewRegistry()
	if err := reg.Register(w.agent, claude.Alias); err != nil {
		w.t.Fatal(err)
	}
	events, err := o.start(ctx, reg, claude.ID, prompt)
	if err != nil {
		w.t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		if err := uestest.ValidateEvent(ev); err != nil {
			w.t.Errorf("invalid event: %v", err)
		}
		evs = append(evs, ev)
	}
	w.t.Logf("events: %v", typesOf(evs))
	noClaudeIn(w.t, w.cwd)
	return evs
}

func typesOf(evs []drover.Event) []drover.EventType { return adaptertest.Types(evs) }

func doneOf(t *testing.T, evs []drover.Event) drover.DonePayload {
	t.Helper()
	d, err := uestest.OneDoneLast(evs)
	if err != nil {
		t.Fatalf("%v: %v", err, typesOf(evs))
	}
	return d
}

func payloads[T any](evs []drover.Event) []T { return adaptertest.Payloads[T](evs) }

// noClaudeIn fails if a process still runs in dir after a run.
func noClaudeIn(t *testing.T, dir string) {
	t.Helper()
	adaptertest.NoProcessIn(t, dir)
}

// TestPERM1_SupervisedDeniesShellWrites: supervised allows edits in the
// workspace, but a shell command that modifies files needs approval, and
// with nobody to approve it is denied.
func TestPERM1_SupervisedDeniesShellWrites(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"touch","steps":[{"tools":[{"shell":"touch touched.txt"}]},{"text":"ok"}]}]}`)
	evs := w.run(context.Background(), "touch it", w.opts())
	doneOf(t, evs)
	if _, err := os.Stat(filepath.Join(w.cwd, "touched.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("supervised let a shell command create a file: %v", err)
	}
	if res := payloads[drover.ToolResultPayload](evs); len(res) != 1 || res[0].Status != drover.ToolDenied {
		t.Fatalf("tool_result %+v", res)
	}
}

// TestPERM1_WorkspaceSettingsCannotWidenTier: a workspace
// .claude/settings.local.json that allows everything does not widen dry-run.
func TestPERM1_WorkspaceSettingsCannotWidenTier(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"touch","steps":[{"tools":[{"shell":"touch touched.txt"}]},{"text":"ok"}]}]}`)
	os.MkdirAll(filepath.Join(w.cwd, ".claude"), 0o755)
	os.WriteFile(filepath.Join(w.cwd, ".claude", "settings.local.json"),
		[]byte(`{"permissions":{"allow":["Bash","Bash(*)","Write","Edit"]}}`), 0o644)
	o := w.opts()
	o.Tier = drover.TierSupervised
	w.run(context.Background(), "touch it", o)
	if _, err := os.Stat(filepath.Join(w.cwd, "touched.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("workspace settings widened the supervised tier")
	}
}

// TestCLI_SIGINTExits130 sends SIGINT to a real `drover run` mid-answer.
func TestCLI_SIGINTExits130(t *testing.T) {
	bin := claudeBin(t)
	droverBin := buildDrover(t)
	script := filepath.Join(t.TempDir(), "slow.json")
	os.WriteFile(script, []byte(`{"rules":[{"match":"","steps":[{"text":"slow","delayMs":60000}]}]}`), 0o644)
	cwd, home := t.TempDir(), t.TempDir()
	cmd := exec.Command(droverBin, "run", "--json", "--fakemodel-script", script, "--cwd", cwd, "-a", "claude", "take your time")
	cmd.Env = append(os.Environ(), "DROVER_CLAUDE_BIN="+bin, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stdout)
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if strings.Contains(sc.Text(), `"type":"init"`) {
			time.Sleep(300 * time.Millisecond) // let claude send its request
			cmd.Process.Signal(syscall.SIGINT)
		}
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want status 130; output %q", err, lines)
	}
	if len(lines) == 0 {
		t.Fatal("no output")
	}
	var last drover.Event
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &last); err != nil {
		t.Fatal(err)
	}
	if d, ok := last.Done(); !ok || d.Status != drover.StatusInterrupted {
		t.Fatalf("last line %s", lines[len(lines)-1])
	}
	noClaudeIn(t, cwd)
}

func buildDrover(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "drover")
	cmd := exec.Command("go", "build", "-o", out, "../cmd/drover")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build drover: %v\n%s", err, b)
	}
	return out
}

// TestCLI_OfflineDemo is the README's main job: the real claude through
// `drover run --fakemodel` with the built-in script.
func TestCLI_OfflineDemo(t *testing.T) {
	bin := claudeBin(t)
	droverBin := buildDrover(t)
	cwd, home := t.TempDir(), t.TempDir()
	logPath := filepath.Join(home, "requests.jsonl")
	cmd := exec.Command(droverBin, "run", "--json", "--fakemodel", "--fakemodel-log", logPath, "--cwd", cwd, "-a", "claude", "write hello.txt, then run ls")
	cmd.Env = append(os.Environ(), "DROVER_CLAUDE_BIN="+bin, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("drover run: %v\n%s", err, out)
	}
	var evs []drover.Event
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev drover.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("stdout is not only UES events: %q", l)
		}
		evs = append(evs, ev)
	}
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	if data, err := os.ReadFile(filepath.Join(cwd, "hello.txt")); err != nil || string(data) != "hello from drover\n" {
		t.Fatalf("hello.txt: %q %v", data, err)
	}
	res := payloads[drover.ToolResultPayload](evs)
	if len(res) != 2 || res[1].ToolName != "Bash" || !strings.Contains(res[1].Output, "hello.txt") {
		t.Fatalf("tool results %+v", res)
	}
	if log, err := os.ReadFile(logPath); err != nil || strings.Count(string(log), "\n") != 3 {
		t.Fatalf("fakemodel log: %v, %d lines", err, strings.Count(string(log), "\n"))
	}
	if _, err := os.Stat(filepath.Join(home, "state", "drover", "fakemodel-home", ".credentials.json")); err == nil {
		t.Fatal("offline run copied credentials into its config home")
	}
	noClaudeIn(t, cwd)
}

// TestADP4_Availability: the pinned claude is found, its version read, and
// recognised as tested.
func TestADP4_Availability(t *testing.T) {
	t.Setenv("DROVER_CLAUDE_BIN", claudeBin(t))
	av := claude.New().Available(context.Background())
	if !av.Installed || av.Version != claude.TestedVersions || !av.Tested || av.Error != "" {
		t.Fatalf("availability %+v", av)
	}
}

// TestClaude_ThinkingAndDeltas: a thinking block becomes "thinking"; with
// PartialText the deltas arrive before the text and add up to it.
func TestClaude_ThinkingAndDeltas(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"","steps":[{"thinking":"Let me consider the request.","text":"Streaming works in several small pieces of text."}]}]}`)
	o := w.opts()
	o.PartialText = true
	evs := w.run(context.Background(), "think, then answer", o)
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	if th := payloads[drover.ThinkingPayload](evs); len(th) != 1 || th[0].Summary != "Let me consider the request." {
		t.Fatalf("thinking %+v", th)
	}
	var joined strings.Builder
	var sawText bool
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case drover.TextDeltaPayload:
			if sawText {
				t.Fatal("a delta arrived after the text it belongs to")
			}
			joined.WriteString(p.Delta)
		case drover.TextPayload:
			sawText = true
			if p.Content != joined.String() {
				t.Fatalf("deltas %q do not add up to text %q", joined.String(), p.Content)
			}
		}
	}
	if n := len(payloads[drover.TextDeltaPayload](evs)); n < 2 {
		t.Fatalf("%d deltas, want several", n)
	}
}
