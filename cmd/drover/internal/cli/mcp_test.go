package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/mcpserver"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// mcpCLI is `drover mcp` running in-process on pipes, with an MCP client
// session on the other ends.
type mcpCLI struct {
	session *mcp.ClientSession
	stderr  *syncBuffer
	code    chan int
}

// startMCP runs drover with args (mcp …) against the fake agent in mode
// and connects a client to it.
func startMCP(t *testing.T, mode string, args ...string) *mcpCLI {
	t.Helper()
	self, _ := os.Executable()
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, mode)
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	m := &mcpCLI{stderr: &syncBuffer{}, code: make(chan int, 1)}
	go func() {
		code := Run(context.Background(), args, inR, outW, m.stderr)
		outW.Close() // the client sees the server go
		inR.Close()
		m.code <- code
	}()
	var err error
	m.session, err = mcp.NewClient(&mcp.Implementation{Name: "test"}, nil).Connect(context.Background(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatalf("connect: %v (stderr %s)", err, m.stderr.String())
	}
	return m
}

// stop closes the session (drover's stdin ends) and returns drover's
// exit status.
func (m *mcpCLI) stop() int {
	m.session.Close()
	return <-m.code
}

func (m *mcpCLI) run(t *testing.T, args map[string]any) mcpserver.Run {
	t.Helper()
	res, err := m.session.CallTool(context.Background(), &mcp.CallToolParams{Name: "run_agent", Arguments: args})
	if err != nil {
		t.Fatal(err)
	}
	var r mcpserver.Run
	data, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(data, &r); err != nil || res.IsError {
		t.Fatalf("run_agent: %v %s", err, data)
	}
	return r
}

// TestMCP1_CommandServesTools: `drover mcp` speaks MCP on stdin and
// stdout, runs an agent through the ledger for run_agent, and exits 0
// when stdin ends.
func TestMCP1_CommandServesTools(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	m := startMCP(t, "ok", "mcp")
	tools, err := m.session.ListTools(context.Background(), nil)
	if err != nil || !slices.ContainsFunc(tools.Tools, func(tool *mcp.Tool) bool { return tool.Name == "run_agent" }) {
		t.Fatalf("tools %v %v", tools, err)
	}
	r := m.run(t, map[string]any{"agent": "claude", "prompt": "say hello"})
	if r.Status != "completed" || r.Result != "ok" || r.Agent != "claude-code" || r.Usage.TotalCostUSD == nil || *r.Usage.TotalCostUSD != 0.001 {
		t.Fatalf("run_agent %+v", r)
	}
	if code := m.stop(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, m.stderr.String())
	}
	if code, out, _ := cli(t, "ok", "ps", "--all", "--json"); code != ExitOK || !strings.Contains(out, r.RunID) {
		t.Fatalf("ps: %d %s", code, out)
	}
}

// TestMCP1_CommandNestsUnderTheAgentsRun: started with DROVER_RUN_ID (as
// drover starts its agents), drover mcp records every run as a child of
// that run, owned by another process on the same ledger; each agent it
// runs learns its own run in turn, never the ledger's address; drover show
// lists the child and rolls its cost up into the parent's total.
func TestMCP1_CommandNestsUnderTheAgentsRun(t *testing.T) {
	db := filepath.Join(t.TempDir(), "drover.db")
	t.Setenv("DROVER_DB", db)
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	// The parent: a run another drover, on another host, owns and runs.
	parent := &store.Run{ID: "run_parent", Agent: "claude-code", Prompt: "delegate", Owner: "elsewhere:1", Options: []byte(`{"tier":"supervised"}`)}
	if err := st.CreateRun(context.Background(), parent); err != nil {
		t.Fatal(err)
	}
	st.Close()

	t.Setenv(runs.EnvRunID, parent.ID)
	m := startMCP(t, "env", "mcp")
	r := m.run(t, map[string]any{"agent": "claude", "prompt": "nested"})
	if r.ParentID != parent.ID || r.Status != "completed" {
		t.Fatalf("run_agent %+v", r)
	}
	if code := m.stop(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, m.stderr.String())
	}
	// What the nested agent was told, as its text says.
	code, out, errOut := cli(t, "env", "show", "--json", r.RunID)
	if code != ExitOK {
		t.Fatalf("show --json: exit %d: %s", code, errOut)
	}
	var shown struct {
		Messages []store.Message `json:"messages"`
	}
	if err := json.Unmarshal([]byte(out), &shown); err != nil {
		t.Fatal(err)
	}
	var said struct {
		RunID, DB string
		Args      []string
	}
	for _, msg := range shown.Messages {
		if msg.Role == "assistant" {
			json.Unmarshal([]byte(msg.Content), &said)
		}
	}
	// The ledger's address is drover's, never the agent's (SEC-5): the
	// nested drover reached it through the socket.
	if said.RunID != r.RunID || said.DB != "" {
		t.Fatalf("the nested agent was told %+v, want its run %s and no ledger (drover's is %s)", said, r.RunID, db)
	}

	code, out, _ = cli(t, "ok", "show", parent.ID)
	for _, want := range []string{"child     " + r.RunID + " claude-code completed",
		"total     3 in / 2 out tokens, 0 tool calls, cost $0.0010 over 2 runs (this one and its descendants), 1 without a cost"} {
		if code != ExitOK || !strings.Contains(out, want) {
			t.Errorf("show lacks %q:\n%s", want, out)
		}
	}
	code, out, _ = cli(t, "ok", "show", "--json", parent.ID)
	var js struct {
		Total runs.TreeUsage `json:"total"`
	}
	if err := json.Unmarshal([]byte(out), &js); code != ExitOK || err != nil || js.Total.Runs != 2 || js.Total.Usage.InputTokens != 3 {
		t.Fatalf("show --json: exit %d, total %+v %v", code, js.Total, err)
	}
	// A run without descendants shows no total.
	if code, out, _ := cli(t, "ok", "show", r.RunID); code != ExitOK || strings.Contains(out, "total ") {
		t.Errorf("a leaf: exit %d, or it shows a total:\n%s", code, out)
	}
}

// TestMCP1_CommandRefusesAParentItCannotFind: a DROVER_RUN_ID that names
// no run of the ledger (the nested drover found another ledger) is an
// error saying so, before anything is served; so is an unknown --parent
// or --max-tier.
func TestMCP1_CommandRefusesAParentItCannotFind(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	t.Setenv(runs.EnvRunID, "run_elsewhere")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"mcp"}, "DROVER_RUN_ID=run_elsewhere names no run of this ledger"},
		{[]string{"mcp", "--parent", "run_nope"}, `no run "run_nope" in the ledger`},
		{[]string{"mcp", "--max-tier", "reckless"}, "--max-tier"},
	} {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), tc.args, strings.NewReader(""), &out, &errb); code != ExitUsage || !strings.Contains(errb.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q, want %q", tc.args, code, errb.String(), tc.want)
		}
	}
}

// TestMCP2_RunMCPConfig: drover run --mcp-config gives the agent the
// servers of a .mcp.json-shaped file (Claude gets them as --mcp-config
// FILE); a file drover cannot read, with an unknown field or no server,
// and a vendor that cannot take a server's transport (Codex: SSE), are
// usage errors.
func TestMCP2_RunMCPConfig(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.json", `{"mcpServers":{"drover":{"command":"drover","args":["mcp"]},"docs":{"type":"http","url":"https://docs.example/mcp"}}}`)
	code, out, stderr := cli(t, "env", "run", "--json", "--mcp-config", good, "-a", "claude", "use them")
	if code != ExitOK {
		t.Fatalf("run: %d %s", code, stderr)
	}
	var said struct{ Args []string }
	for _, ev := range decodeEvents(t, out) {
		if p, ok := ev.Payload.(drover.TextPayload); ok {
			json.Unmarshal([]byte(p.Content), &said)
		}
	}
	if i := slices.Index(said.Args, "--mcp-config"); i < 0 || i == len(said.Args)-1 {
		t.Fatalf("claude's arguments %q lack --mcp-config FILE", said.Args)
	}
	for _, tc := range []struct {
		file, agent, want string
	}{
		{filepath.Join(dir, "missing.json"), "claude", "--mcp-config"},
		{write("unknown.json", `{"mcpServers":{"x":{"command":"x","timeout":5}}}`), "claude", `unknown field "timeout"`},
		{write("none.json", `{"servers":{}}`), "claude", `unknown field "servers"`},
		{write("empty.json", `{"mcpServers":{}}`), "claude", "names no server"},
		{write("bad.json", `{"mcpServers":{"x":{"type":"ws","url":"ws://x"}}}`), "claude", `type "ws"`},
		{write("sse.json", `{"mcpServers":{"feed":{"type":"sse","url":"https://feed.example/sse"}}}`), "codex", "cannot use sse"},
	} {
		code, _, stderr := cli(t, "ok", "run", "--mcp-config", tc.file, "-a", tc.agent, "x")
		if code != ExitUsage || !strings.Contains(stderr, tc.want) {
			t.Errorf("%s with %s: exit %d, stderr %q, want %q", tc.agent, filepath.Base(tc.file), code, stderr, tc.want)
		}
	}
}

// TestMCP1_CommandUsesTheParentsSocket: started inside a run of a drover
// that serves nested runs (DROVER_SOCKET and DROVER_RUN_TOKEN, as drover
// gives its agents), drover mcp never opens the ledger: it asks that
// drover, which runs the agent as the run's child; a socket nobody serves
// is an error naming it, before anything is served.
func TestMCP1_CommandUsesTheParentsSocket(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	tokens := make(chan string, 1)
	reg := builtin.Registry()
	if err := reg.Register(&agenttest.Agent{Name: "holder", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		tokens <- req.Options.Env[runs.EnvRunToken]
		if y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "holding"}}, nil) {
			<-ctx.Done()
		}
	}}); err != nil {
		t.Fatal(err)
	}
	sup, err := runs.New(ctx, engine.New(reg), st, runs.Config{Owner: "outer:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	serveNested(sup, nil)
	parent, err := sup.Start(ctx, runs.StartRequest{Agent: "holder", Prompt: "delegate"})
	if err != nil {
		t.Fatal(err)
	}
	// No ledger where the nested drover would look for one.
	elsewhere := filepath.Join(t.TempDir(), "elsewhere.db")
	t.Setenv("DROVER_DB", elsewhere)
	t.Setenv(runs.EnvRunID, parent.RunID)
	t.Setenv(runs.EnvSocket, sup.NestedSocket())
	t.Setenv(runs.EnvRunToken, <-tokens)

	m := startMCP(t, "ok", "mcp")
	r := m.run(t, map[string]any{"agent": "claude", "prompt": "nested"})
	if r.ParentID != parent.RunID || r.Status != "completed" || r.Result != "ok" {
		t.Fatalf("run_agent %+v", r)
	}
	if code := m.stop(); code != ExitOK {
		t.Fatalf("exit %d: %s", code, m.stderr.String())
	}
	child, err := st.GetRun(ctx, r.RunID)
	if err != nil || child.Owner != "outer:1" || child.ParentID != parent.RunID {
		t.Fatalf("the child in the parent's ledger %+v %v", child, err)
	}
	if _, err := os.Stat(elsewhere); !os.IsNotExist(err) {
		t.Errorf("drover mcp opened a ledger of its own: %v", err)
	}

	gone := filepath.Join(t.TempDir(), "gone.sock")
	t.Setenv(runs.EnvSocket, gone)
	var out, errb bytes.Buffer
	if code := Run(ctx, []string{"mcp"}, strings.NewReader(""), &out, &errb); code == ExitOK || !strings.Contains(errb.String(), runs.EnvSocket+"="+gone) {
		t.Fatalf("a socket nobody serves: exit %d, stderr %q", code, errb.String())
	}
}
