package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	acp "github.com/coder/acp-go-sdk"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/acpagent/editortest"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// TestACP2_Command: `drover acp` speaks ACP on stdin and stdout (nothing
// else on stdout) with the built-in agents: a prompt runs claude (the fake
// one, which asks to run make), the question reaches the editor and its
// answer lets the call run; the run is in the ledger under the ACP
// session's id; the end of stdin ends drover with status 0.
func TestACP2_Command(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, "ask")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	db := filepath.Join(t.TempDir(), "drover.db")

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stdout, stderr bytes.Buffer
	exited := make(chan int, 1)
	go func() {
		code := Run(context.Background(), []string{"acp", "--db", db, "-a", "claude"}, inR, io.MultiWriter(outW, &stdout), &stderr)
		outW.Close()
		inR.Close()
		exited <- code
	}()
	editor := editortest.New()
	editor.Answer(acp.PermissionOptionKindAllowOnce)
	conn := acp.NewClientSideConnection(editor, inW, outR)
	conn.SetLogger(slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	defer func() {
		inW.Close()
		<-conn.Done()
	}()

	if _, err := conn.Initialize(ctx, acp.InitializeRequest{ProtocolVersion: acp.ProtocolVersionNumber}); err != nil {
		t.Fatal(err)
	}
	cwd := t.TempDir()
	ns, err := conn.NewSession(ctx, acp.NewSessionRequest{Cwd: cwd, McpServers: []acp.McpServer{}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := conn.Prompt(ctx, acp.PromptRequest{SessionId: ns.SessionId, Prompt: []acp.ContentBlock{acp.TextBlock("build it")}})
	if err != nil {
		t.Fatalf("prompt: %v\nstderr: %s", err, stderr.String())
	}
	if r.StopReason != acp.StopReasonEndTurn {
		t.Fatalf("stop reason %s", r.StopReason)
	}
	if asked, said := len(editor.Asked()), editortest.AgentText(editor.Take()); asked != 1 || said != "built" {
		t.Fatalf("editor asked %d times; the agent said %q", asked, said)
	}
	inW.Close()
	if code := <-exited; code != ExitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}

	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var m struct {
			JSONRPC string `json:"jsonrpc"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.JSONRPC != "2.0" {
			t.Fatalf("stdout line is not JSON-RPC: %q", sc.Text())
		}
	}

	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rs, err := st.ListRuns(context.Background(), store.RunFilter{SessionID: string(ns.SessionId)})
	if err != nil || len(rs) != 1 {
		t.Fatalf("runs of the session: %+v, %v", rs, err)
	}
	run := rs[0]
	if run.Agent != "claude-code" || run.Status != store.StatusCompleted || run.Prompt != "build it" {
		t.Fatalf("run %+v", run)
	}
	calls, err := st.ToolCalls(context.Background(), run.ID)
	if err != nil || len(calls) != 1 || calls[0].Status != drover.ToolSuccess || calls[0].Permission == nil || calls[0].Permission.Detail != "acp" {
		t.Fatalf("tool calls %+v, %v", calls, err)
	}
}

// TestACP2_CommandUsage: what `drover acp` cannot serve is refused before
// anything starts (exit 2).
func TestACP2_CommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"acp", "-a", "nosuch"},
		{"acp", "--tier", "reckless"},
		{"acp", "--approval-timeout", "0s"},
		{"acp", "extra"},
	} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, strings.NewReader(""), &out, &errb); code != ExitUsage || out.Len() != 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errb.String())
		}
	}
}
