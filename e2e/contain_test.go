package e2e

// Kernel-enforced boundaries with the real vendor CLIs (SEC-2, BND-1,
// BND-2, BND-3): the real drover binary runs each pinned CLI against
// fakemodel, which scripts shell commands that write inside and outside
// the workspace.

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
	"github.com/drover-run/drover/internal/contain"
)

// containWorld is one vendor's setup: the built drover, the pinned CLI,
// a workspace, a home, drover's state (the ledger's directory, the
// fakemodel config home) and a file name in /tmp no one else uses.
type containWorld struct {
	t                              *testing.T
	drover, agent                  string
	env                            []string
	dir, ws, home, state, db, tmpf string
}

func newContainWorld(t *testing.T, droverBin, agent string) *containWorld {
	t.Helper()
	if err := contain.Available(); err != nil {
		t.Fatalf("this kernel cannot contain, the SEC-2 tests need it: %v", err)
	}
	w := &containWorld{t: t, drover: droverBin, agent: agent, dir: t.TempDir()}
	w.ws, w.home, w.state = filepath.Join(w.dir, "ws"), filepath.Join(w.dir, "home"), filepath.Join(w.dir, "state")
	w.db = filepath.Join(w.state, "drover", "drover.db")
	for _, d := range []string{w.ws, w.home, filepath.Dir(w.db)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	var b [6]byte
	rand.Read(b[:])
	w.tmpf = "/tmp/drover-e2e-contain-" + hex.EncodeToString(b[:])
	t.Cleanup(func() { os.Remove(w.tmpf) })
	w.env = append(os.Environ(), "HOME="+w.home, "XDG_STATE_HOME="+w.state, "XDG_CONFIG_HOME="+filepath.Join(w.home, ".config"),
		"DROVER_CLAUDE_BIN="+claudeBin(t), codex.BinaryEnv+"="+vendorBin(t, "codex", codex.BinaryEnv),
		gemini.BinaryEnv+"="+vendorBin(t, "gemini", gemini.BinaryEnv), opencode.BinaryEnv+"="+vendorBin(t, "opencode", opencode.BinaryEnv))
	return w
}

// outside are the files the script writes outside the workspace: in the
// home, directly in /tmp, and in the ledger's directory.
func (w *containWorld) outside() []string {
	return []string{filepath.Join(w.home, "escaped.txt"), w.tmpf, filepath.Join(filepath.Dir(w.db), "escaped.txt")}
}

// script writes inside.txt in the workspace, then each outside file, each
// in its own command so that one failing does not stop the others.
func (w *containWorld) script() string {
	cmds := []string{"echo in > inside.txt"}
	for _, f := range w.outside() {
		cmds = append(cmds, "echo out > "+f)
	}
	return w.write("script.json", fmt.Sprintf(`{"rules":[{"match":"write","steps":[{"tools":[{"shell":%q}]},{"text":"tried"}]},
  {"match":"hello","steps":[{"text":"hello"}]}]}`, strings.Join(cmds, "; ")))
}

func (w *containWorld) write(name, body string) string {
	p := filepath.Join(w.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// run runs drover run --json with args and returns the events.
func (w *containWorld) run(args ...string) []drover.Event {
	w.t.Helper()
	cmd := exec.Command(w.drover, append([]string{"run", "--json", "--db", w.db, "--cwd", w.ws, "-a", w.agent}, args...)...)
	cmd.Env = w.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("drover run %v: %v\n%s", args, err, stderr.String())
	}
	var evs []drover.Event
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var ev drover.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			w.t.Fatalf("stdout line %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	w.t.Logf("%s %v: %v", w.agent, args, typesOf(evs))
	return evs
}

// TestSEC2_ContainedRealCLIs: each real CLI in autonomous with --contain
// runs a shell command that writes in its workspace (it succeeds) and
// outside it, in $HOME, /tmp and the ledger's directory (each write fails,
// no file is left); the run completes and done says contained. Without
// containment the same script writes all of them, so the test can fail.
func TestSEC2_ContainedRealCLIs(t *testing.T) {
	droverBin := buildDrover(t)
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			w := newContainWorld(t, droverBin, agent)
			script := w.script()
			evs := w.run("--tier", "autonomous", "--contain", "--fakemodel-script", script, "write the files")
			d := doneOf(t, evs)
			if d.Status != drover.StatusSuccess || evs[len(evs)-1].Metadata["contained"] != true {
				t.Fatalf("done %+v, metadata %v", d, evs[len(evs)-1].Metadata)
			}
			if b, err := os.ReadFile(filepath.Join(w.ws, "inside.txt")); err != nil || string(b) != "in\n" {
				t.Errorf("the write inside the workspace: %q, %v", b, err)
			}
			for _, f := range w.outside() {
				if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("contained, %s wrote %s (%v)", agent, f, err)
				}
			}
			if res := payloads[drover.ToolResultPayload](evs); len(res) != 1 {
				t.Errorf("tool results %+v", res)
			} else {
				t.Logf("the shell said: %s", res[0].Output)
			}

			os.Remove(filepath.Join(w.ws, "inside.txt"))
			evs = w.run("--tier", "autonomous", "--fakemodel-script", script, "write the files")
			if md := evs[len(evs)-1].Metadata; md["contained"] != false || md["containment"] != "autonomous" {
				t.Errorf("uncontained: done metadata %v", md)
			}
			for _, f := range w.outside() {
				if _, err := os.Stat(f); err != nil {
					t.Errorf("uncontained, %s did not write %s: the test proves nothing (%v)", agent, f, err)
				}
			}
		})
	}
}

// TestSEC2_SupervisedContainedByDefault: a run in the default tier is
// contained without asking (done says so), Codex's too: drover runs every
// run it supervises live, and there Codex runs its commands under the
// kernel's boundary rather than in its own sandbox.
func TestSEC2_SupervisedContainedByDefault(t *testing.T) {
	droverBin := buildDrover(t)
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			w := newContainWorld(t, droverBin, agent)
			evs := w.run("--fakemodel-script", w.script(), "say hello")
			d := doneOf(t, evs)
			md := evs[len(evs)-1].Metadata
			if d.Status != drover.StatusSuccess || md["contained"] != true || md["containment"] != nil {
				t.Fatalf("done %+v, metadata %v, want contained", d, md)
			}
		})
	}
}

// protocolSession is drover serve --stdio with the real claude.
type protocolSession struct {
	t   *testing.T
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Scanner
}

func (p *protocolSession) call(req string) map[string]json.RawMessage {
	p.t.Helper()
	if _, err := io.WriteString(p.in, req+"\n"); err != nil {
		p.t.Fatal(err)
	}
	for p.out.Scan() {
		var l map[string]json.RawMessage
		if err := json.Unmarshal(p.out.Bytes(), &l); err != nil {
			p.t.Fatalf("line %q: %v", p.out.Text(), err)
		}
		if _, ok := l["id"]; ok {
			return l
		}
	}
	p.t.Fatalf("drover serve ended: %v", p.out.Err())
	return nil
}

// errorCode returns the code of a response's error, "" for a result.
func errorCode(l map[string]json.RawMessage) string {
	var e struct{ Code, Message string }
	json.Unmarshal(l["error"], &e)
	return e.Code
}

// TestBND1_ChildOutsideParentRefused and the ledger in a workspace
// (BND-3), through drover serve --stdio with the real claude: a child run
// asking for a directory outside its parent's is BOUNDARY_VIOLATION, one
// inside runs; a run whose workspace contains the ledger's directory is
// BOUNDARY_VIOLATION; neither refused run is recorded.
func TestBND1_ChildOutsideParentRefused(t *testing.T) {
	w := newContainWorld(t, buildDrover(t), "claude")
	script := w.write("script.json", `{"rules":[{"match":"parent","steps":[{"text":"slow","delayMs":120000}]},{"match":"child","steps":[{"text":"done"}]}]}`)
	other := filepath.Join(w.dir, "other")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(w.drover, "serve", "--stdio", "--db", w.db, "--fakemodel-script", script)
	cmd.Env, cmd.Dir = w.env, w.ws
	in, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &protocolSession{t: t, cmd: cmd, in: in, out: bufio.NewScanner(stdout)}
	p.out.Buffer(nil, 1<<20)
	defer func() {
		in.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			cmd.Process.Kill()
			<-done
			t.Errorf("drover serve did not end at EOF: %s", stderr.String())
		}
	}()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }

	l := p.call(`{"id":1,"op":"run","agent":"claude","prompt":"parent","options":{"cwd":` + q(w.ws) + `}}`)
	var parent struct{ RunID string }
	if err := json.Unmarshal(l["result"], &parent); err != nil || parent.RunID == "" {
		t.Fatalf("parent: %s", l["error"])
	}
	for i, o := range []string{`{"cwd":` + q(other) + `}`, `{"cwd":` + q(w.ws) + `,"addDirs":[` + q(other) + `]}`} {
		if code := errorCode(p.call(fmt.Sprintf(`{"id":%d,"op":"run","agent":"claude","prompt":"child","parent":%q,"options":%s}`, 10+i, parent.RunID, o))); code != "BOUNDARY_VIOLATION" {
			t.Errorf("child with %s: %q, want BOUNDARY_VIOLATION", o, code)
		}
	}
	l = p.call(`{"id":2,"op":"run","agent":"claude","prompt":"child","parent":"` + parent.RunID + `","options":{"cwd":` + q(filepath.Join(w.ws)) + `}}`)
	var child struct{ RunID string }
	if err := json.Unmarshal(l["result"], &child); err != nil || child.RunID == "" {
		t.Fatalf("a child inside its parent's workspace: %s", l["error"])
	}
	if code := errorCode(p.call(`{"id":3,"op":"run","agent":"claude","prompt":"child","options":{"cwd":` + q(w.dir) + `}}`)); code != "BOUNDARY_VIOLATION" {
		t.Errorf("a workspace around the ledger: %q, want BOUNDARY_VIOLATION", code)
	}
	l = p.call(`{"id":4,"op":"await","runId":"` + child.RunID + `"}`)
	if errorCode(l) != "" || !strings.Contains(string(l["result"]), `"completed"`) {
		t.Errorf("the child: %s %s", l["result"], l["error"])
	}
	p.call(`{"id":5,"op":"cancel","runId":"` + parent.RunID + `"}`)
	l = p.call(`{"id":6,"op":"list"}`)
	var list struct{ Runs []struct{ ID string } }
	json.Unmarshal(l["result"], &list)
	if len(list.Runs) != 2 {
		t.Errorf("runs in the ledger: %s (want the parent and its one child)", l["result"])
	}
}
