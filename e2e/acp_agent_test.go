package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/acpagent/editortest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// turnOf is what the editor was shown of a turn: the agent's text and the
// statuses its tool calls ended with.
func turnOf(ed *editortest.Editor) (text string, ended []acp.ToolCallStatus) {
	us := ed.Take()
	for _, u := range us {
		if st := u.ToolCallUpdate; st != nil && st.Status != nil &&
			(*st.Status == acp.ToolCallStatusCompleted || *st.Status == acp.ToolCallStatusFailed) {
			ended = append(ended, *st.Status)
		}
	}
	return editortest.AgentText(us), ended
}

// acpDrover is a `drover acp` child process driving the pinned claude
// against fakemodel (liveScript), with an editor connected.
type acpDrover struct {
	t      *testing.T
	bin    string // drover
	db     string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *strings.Builder
	conn   *acp.ClientSideConnection
	ed     *editortest.Editor
	exited chan error
}

// startACP starts `drover acp` with its ledger and homes in home.
func startACP(t *testing.T, droverBin, home string) *acpDrover {
	t.Helper()
	claudeBin := claudeBin(t)
	script := filepath.Join(home, "script.json")
	if err := os.WriteFile(script, []byte(liveScript), 0o644); err != nil {
		t.Fatal(err)
	}
	d := &acpDrover{t: t, bin: droverBin, db: filepath.Join(home, "drover.db"), ed: editortest.New(), stderr: &strings.Builder{},
		exited: make(chan error, 1)}
	d.cmd = exec.Command(droverBin, "acp", "-a", "claude", "--tier", "supervised", "--db", d.db, "--fakemodel-script", script)
	d.cmd.Env = append(os.Environ(), "DROVER_CLAUDE_BIN="+claudeBin, "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	d.cmd.Stderr = &syncBuilder{b: d.stderr}
	var err error
	if d.stdin, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d.conn = acp.NewClientSideConnection(d.ed, d.stdin, stdout)
	d.conn.SetLogger(slog.New(slog.DiscardHandler))
	// Wait reads stdout to its end after the connection's reader has:
	// the process is reaped once both are done.
	go func() {
		<-d.conn.Done()
		d.exited <- d.cmd.Wait()
	}()
	t.Cleanup(func() {
		d.stdin.Close()
		select {
		case <-d.exited:
		case <-time.After(time.Minute):
			d.cmd.Process.Kill()
			<-d.exited
		}
	})
	return d
}

// syncBuilder is a strings.Builder safe for the process's stderr copier
// and the test reading it.
type syncBuilder struct {
	mu sync.Mutex
	b  *strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (d *acpDrover) logs() string {
	sb := d.cmd.Stderr.(*syncBuilder)
	sb.mu.Lock()
	defer sb.mu.Unlock()
	return sb.b.String()
}

// prompt prompts session with text and returns the response and its run.
func (d *acpDrover) prompt(ctx context.Context, session acp.SessionId, text string) (acp.PromptResponse, string) {
	d.t.Helper()
	r, err := d.conn.Prompt(ctx, acp.PromptRequest{SessionId: session, Prompt: []acp.ContentBlock{acp.TextBlock(text)}})
	if err != nil {
		d.t.Fatalf("prompt %q: %v\ndrover stderr:\n%s", text, err, d.logs())
	}
	meta, _ := r.Meta["drover"].(map[string]any)
	run, _ := meta["runId"].(string)
	if run == "" {
		d.t.Fatalf("response %+v names no run", r)
	}
	return r, run
}

// show is `drover show --json RUN` of d's ledger.
func (d *acpDrover) show(run string) (rec store.Run, calls []store.ToolCall) {
	d.t.Helper()
	out, err := exec.Command(d.bin, "show", "--json", "--db", d.db, run).Output()
	if err != nil {
		d.t.Fatalf("drover show %s: %v", run, err)
	}
	var v struct {
		Run       store.Run        `json:"run"`
		ToolCalls []store.ToolCall `json:"toolCalls"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		d.t.Fatalf("drover show: %v: %s", err, out)
	}
	return v.Run, v.ToolCalls
}

// TestACP2_ClaudeThroughDroverACP: an editor reaches the real claude through
// `drover acp`. In one session: a shell call in supervised is asked in the
// editor and allowed (the file exists), then asked and rejected (it does
// not); a slow answer is cancelled (the run interrupted, the prompt
// answered cancelled) and the session goes on after it. Every run is in
// the ledger with the session and the editor's answers (drover show), and
// the end of stdin ends drover with status 0, leaving no process behind.
// Another `drover acp` on the ledger loads the session and replays it.
func TestACP2_ClaudeThroughDroverACP(t *testing.T) {
	home := t.TempDir()
	d := startACP(t, buildDrover(t), home)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	init, err := d.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber})
	if err != nil {
		t.Fatalf("initialize: %v\n%s", err, d.logs())
	}
	if init.AgentInfo == nil || init.AgentInfo.Name != "drover" || !init.AgentCapabilities.LoadSession {
		t.Fatalf("initialize %+v", init)
	}
	cwd := t.TempDir()
	ns, err := d.conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	sid := string(ns.SessionId)

	// Allowed: the command runs.
	d.ed.Answer(acp.PermissionOptionKindAllowOnce)
	r, allowed := d.prompt(ctx, ns.SessionId, "touch allowed.txt")
	text, ended := turnOf(d.ed)
	if r.StopReason != acp.StopReasonEndTurn || !strings.Contains(text, "touched allowed.txt") || len(ended) != 1 || ended[0] != acp.ToolCallStatusCompleted {
		t.Fatalf("allowed turn: %+v, said %q, tool calls ended %v\n%s", r, text, ended, d.logs())
	}
	q := d.ed.Asked()
	if len(q) != 1 || q[0].ToolCall.RawInput == nil || !strings.Contains(*q[0].ToolCall.Title, "touch allowed.txt") || *q[0].ToolCall.Kind != acp.ToolKindExecute {
		t.Fatalf("questions %+v", q)
	}
	if _, err := os.Stat(filepath.Join(cwd, "allowed.txt")); err != nil {
		t.Fatalf("the allowed command did not run: %v", err)
	}

	// Rejected: it does not.
	d.ed.Answer(acp.PermissionOptionKindRejectOnce)
	r, denied := d.prompt(ctx, ns.SessionId, "touch denied.txt")
	_, ended = turnOf(d.ed)
	if r.StopReason != acp.StopReasonEndTurn || len(d.ed.Asked()) != 2 || len(ended) == 0 || ended[len(ended)-1] != acp.ToolCallStatusFailed {
		t.Fatalf("rejected turn: %+v, %d questions in all, tool calls ended %v", r, len(d.ed.Asked()), ended)
	}
	if _, err := os.Stat(filepath.Join(cwd, "denied.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a rejected command ran: %v", err)
	}

	// Cancelled: once claude has asked the model (the run's init is in the
	// ledger), session/cancel interrupts the run.
	var wg sync.WaitGroup
	var slow acp.PromptResponse
	var slowErr error
	wg.Go(func() {
		slow, slowErr = d.conn.Prompt(ctx, acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("slow")}})
	})
	waitForInit(ctx, t, d.db, sid, 3)
	if err := d.conn.Cancel(ctx, acp.CancelNotification{SessionId: ns.SessionId}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if slowErr != nil || slow.StopReason != acp.StopReasonCancelled {
		t.Fatalf("cancelled prompt: %+v, %v\n%s", slow, slowErr, d.logs())
	}
	meta, _ := slow.Meta["drover"].(map[string]any)
	cancelled, _ := meta["runId"].(string)

	// The session goes on.
	d.ed.Take()
	if r, _ := d.prompt(ctx, ns.SessionId, "still there?"); r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("after the cancel: %+v", r)
	}
	if text, _ := turnOf(d.ed); !strings.Contains(text, "heard: still there?") {
		t.Fatalf("after the cancel claude said %q", text)
	}

	// The ledger.
	for _, c := range []struct {
		run      string
		behavior drover.Behavior
		status   drover.ToolStatus
	}{{allowed, drover.Allow, drover.ToolSuccess}, {denied, drover.Deny, drover.ToolDenied}} {
		rec, calls := d.show(c.run)
		if rec.SessionID != sid || rec.Agent != "claude-code" || rec.Status != store.StatusCompleted {
			t.Errorf("run %s: %+v", c.run, rec)
		}
		if len(calls) != 1 || calls[0].Status != c.status || calls[0].Permission == nil || calls[0].Permission.Behavior != c.behavior ||
			calls[0].Permission.Detail != "acp" {
			t.Errorf("run %s: tool calls %+v", c.run, calls)
		}
	}
	if rec, _ := d.show(cancelled); rec.SessionID != sid || rec.Status != store.StatusFailed || rec.DoneStatus != drover.StatusInterrupted {
		t.Errorf("cancelled run %+v, want interrupted", rec)
	}

	d.stdin.Close()
	if err := <-d.exited; err != nil {
		t.Fatalf("drover acp: %v\n%s", err, d.logs())
	}
	d.exited <- nil // for the cleanup
	noClaudeIn(t, cwd)

	// Another drover acp loads the session: the editor is shown it again.
	d2 := startACP(t, d.bin, home)
	if _, err := d2.conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	if _, err := d2.conn.LoadSession(ctx, acp.LoadSessionRequest{SessionId: ns.SessionId, Cwd: cwd, McpServers: []acp.McpServer{}}); err != nil {
		t.Fatalf("load: %v\n%s", err, d2.logs())
	}
	replayed := d2.ed.Take()
	var users []string
	for _, u := range editortest.Describe(replayed) {
		if p, ok := strings.CutPrefix(u, "user "); ok {
			users = append(users, p)
		}
	}
	if want := []string{"touch allowed.txt", "touch denied.txt", "slow", "still there?"}; !slices.Equal(users, want) {
		t.Fatalf("replayed prompts %q, want %q", users, want)
	}
	if text := editortest.AgentText(replayed); !strings.Contains(text, "touched allowed.txt") {
		t.Fatalf("replayed answers %q", text)
	}
}

// waitForInit waits until session's run number n (1-based, oldest first)
// has recorded its init event: claude has started and is asking the model.
func waitForInit(ctx context.Context, t *testing.T, db, session string, n int) {
	t.Helper()
	st, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		rs, err := st.ListRuns(ctx, store.RunFilter{SessionID: session})
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) >= n {
			evs, err := st.Events(ctx, rs[len(rs)-n].ID, 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				if e.Type == drover.TypeInit {
					time.Sleep(500 * time.Millisecond) // let claude send its request
					return
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("run %d of session %s never started", n, session)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
