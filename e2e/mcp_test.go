package e2e

// drover as an MCP server inside a run (MCP-1, MCP-2): the real drover
// binary runs the pinned claude, contained (the default in supervised),
// with `drover mcp` registered through `drover run --mcp-config`;
// fakemodel scripts Claude to call run_agent, and the nested drover, a
// client of the outer one over its socket (it cannot write the ledger
// from inside the contained run), has the outer drover run the pinned
// codex, recorded as the Claude run's child in the same ledger.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// mcpScript drives both levels: Claude is asked to delegate and calls
// drover's run_agent with codex; Codex's prompt matches the second rule.
const mcpScript = `{"rules":[
  {"name":"delegate","match":"(?i)ask codex","steps":[
    {"text":"Asking Codex.","tools":[{"name":"mcp__drover__run_agent","input":{"agent":"codex","prompt":"codex, say hello"}}],"usage":{"input":100,"output":20}},
    {"text":"Codex said hello.","usage":{"input":150,"output":10}}]},
  {"name":"nested","match":"codex, say hello","steps":[{"text":"hello from codex","usage":{"input":40,"output":8}}]}
]}`

// mcpWorld is one nested setup: the built drover, the pinned CLIs, the
// outer run's workspace and home, and the ledger.
type mcpWorld struct {
	t                         *testing.T
	drover, claude, codex     string
	dir, cwd, home, db, state string
}

func newMCPWorld(t *testing.T) *mcpWorld {
	w := &mcpWorld{t: t, claude: claudeBin(t), codex: vendorBin(t, "codex", codex.BinaryEnv), drover: buildDrover(t), dir: t.TempDir()}
	w.cwd, w.home = filepath.Join(w.dir, "ws"), filepath.Join(w.dir, "home")
	w.db = filepath.Join(w.dir, "ledger", "drover.db")
	// The nested drover's own state directory: not where the ledger is,
	// so it finds the ledger only through what drover tells its agents.
	w.state = filepath.Join(w.dir, "nested-state")
	for _, d := range []string{w.cwd, w.home, filepath.Dir(w.db)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func (w *mcpWorld) write(name, body string) string {
	p := filepath.Join(w.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// env is the outer drover's environment: the test's, without anything
// that would tell a drover where the ledger or a run is.
func (w *mcpWorld) env() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, runs.EnvDB+"=") || strings.HasPrefix(kv, runs.EnvRunID+"=") || strings.HasPrefix(kv, "XDG_STATE_HOME=")
	})
	return append(env, "DROVER_CLAUDE_BIN="+w.claude, codex.BinaryEnv+"="+w.codex, "HOME="+w.home,
		"XDG_STATE_HOME="+filepath.Join(w.home, "state"))
}

// drover runs the built drover with args and returns its stdout.
func (w *mcpWorld) run(args ...string) string {
	w.t.Helper()
	cmd := exec.Command(w.drover, args...)
	cmd.Env = w.env()
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("drover %s: %v\nstdout %s\nstderr %s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out)
}

// shown is what `drover show --json` prints.
type shown struct {
	Run      store.Run      `json:"run"`
	Children []store.Run    `json:"children"`
	Total    runs.TreeUsage `json:"total"`
}

func (w *mcpWorld) show(id string) shown {
	w.t.Helper()
	var s shown
	if err := json.Unmarshal([]byte(w.run("show", "--json", "--db", w.db, id)), &s); err != nil {
		w.t.Fatal(err)
	}
	return s
}

// noDroverLeft fails if a process of the built drover still runs.
func (w *mcpWorld) noDroverLeft() {
	w.t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && exe == w.drover {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			w.t.Errorf("drover process %s (%q) still runs", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
}

// TestMCP1_ClaudeRunsCodexThroughDroverMCP: the real claude, run by the
// real drover with `drover mcp` as its MCP server (drover run
// --mcp-config), calls run_agent; the MCP call is a permission request
// like any other in supervised (a rule allows it) and a tool_use /
// tool_result named mcp__drover__run_agent whose output is Codex's
// answer. The Claude run was contained; the nested drover mcp, inside
// it, reaches the outer drover over DROVER_SOCKET (its own state
// directory is elsewhere, and the ledger is not writable from there),
// which runs Codex as the Claude run's child; drover show lists it and
// rolls both runs' usage up; no process is left.
func TestMCP1_ClaudeRunsCodexThroughDroverMCP(t *testing.T) {
	w := newMCPWorld(t)
	script := w.write("script.json", mcpScript)
	// The nested drover runs inside Claude's containment: the run's
	// workspace is where it may write its fakemodel log.
	outerLog, nestedLog := filepath.Join(w.dir, "outer.jsonl"), filepath.Join(w.cwd, "nested.jsonl")
	servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"drover": map[string]any{
		"command": w.drover, "args": []string{"mcp", "--fakemodel-script", script, "--fakemodel-log", nestedLog},
		"env": map[string]string{"XDG_STATE_HOME": w.state}}}})
	mcpConfig := w.write("mcp.json", string(servers))

	out := w.run("run", "--json", "--db", w.db, "--fakemodel-script", script, "--fakemodel-log", outerLog,
		"--mcp-config", mcpConfig, "--allow", "mcp__drover__run_agent", "--cwd", w.cwd, "-a", "claude", "ask codex to say hello")
	var evs []drover.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		var ev drover.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("stdout is not only UES events: %q", l)
		}
		evs = append(evs, ev)
	}
	t.Logf("events: %v", typesOf(evs))
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "Codex said hello." {
		t.Fatalf("claude's done %+v", d)
	}
	if last := evs[len(evs)-1]; last.Metadata[runner.MetaContained] != true {
		t.Fatalf("the claude run was not contained: done metadata %v", last.Metadata)
	}
	claudeRun := evs[0].RunID

	// The MCP call in UES: asked, allowed by the rule, used, answered.
	const tool = "mcp__drover__run_agent"
	asked := payloads[drover.PermissionRequestPayload](evs)
	answers := payloads[drover.PermissionAnswerPayload](evs)
	uses := payloads[drover.ToolUsePayload](evs)
	results := payloads[drover.ToolResultPayload](evs)
	if len(asked) != 1 || asked[0].ToolName != tool || len(answers) != 1 || answers[0].Behavior != drover.Allow || answers[0].By != drover.ByRule {
		t.Fatalf("permission: asked %+v, answered %+v\nstdout %s", asked, answers, out)
	}
	if len(uses) != 1 || uses[0].ToolName != tool || uses[0].Input["agent"] != "codex" {
		t.Fatalf("tool_use %+v", uses)
	}
	if len(results) != 1 || results[0].ToolName != tool || results[0].Status != drover.ToolSuccess || !strings.Contains(results[0].Output, "hello from codex") {
		t.Fatalf("tool_result %+v", results)
	}

	// The tree in the ledger, as drover show has it.
	outer := w.show(claudeRun)
	if len(outer.Children) != 1 {
		t.Fatalf("claude run's children %+v", outer.Children)
	}
	child := outer.Children[0]
	// The outer drover ran the child (the nested one only asked it to).
	if child.Agent != codex.ID || child.ParentID != claudeRun || child.Status != store.StatusCompleted || child.Owner != outer.Run.Owner {
		t.Fatalf("child %+v (parent owned by %s)", child, outer.Run.Owner)
	}
	if cs := w.show(child.ID); cs.Run.ParentID != claudeRun {
		t.Fatalf("the codex run in the ledger %+v", cs.Run)
	}
	if !strings.Contains(results[0].Output, child.ID) {
		t.Errorf("run_agent's answer does not name the child run %s: %s", child.ID, results[0].Output)
	}
	cu, pu := child.Usage, outer.Run.Usage
	if cu.InputTokens == 0 || pu.InputTokens == 0 || pu.TotalCostUSD == nil {
		t.Fatalf("usage: claude %+v, codex %+v", pu, cu)
	}
	tu := outer.Total
	if tu.Runs != 2 || tu.Usage.InputTokens != pu.InputTokens+cu.InputTokens || tu.Usage.OutputTokens != pu.OutputTokens+cu.OutputTokens ||
		tu.Usage.TotalCostUSD == nil || *tu.Usage.TotalCostUSD != *pu.TotalCostUSD+cost(cu) {
		t.Fatalf("total %+v, claude %+v, codex %+v", tu, pu, cu)
	}
	human := w.run("show", "--db", w.db, claudeRun)
	t.Logf("drover show:\n%s", human)
	for _, want := range []string{"child     " + child.ID + " codex completed", "total     ", "over 2 runs"} {
		if !strings.Contains(human, want) {
			t.Errorf("drover show lacks %q:\n%s", want, human)
		}
	}
	// Each drover talked to its own fakemodel: Claude's turns to the
	// outer, Codex's to the nested one.
	if rules := loggedRules(t, nestedLog); !slices.Contains(rules, "nested") || slices.Contains(rules, "delegate") {
		t.Errorf("nested fakemodel answered %v", rules)
	}
	if rules := loggedRules(t, outerLog); !slices.Contains(rules, "delegate") || slices.Contains(rules, "nested") {
		t.Errorf("outer fakemodel answered %v", rules)
	}
	// Nothing nested fell back to a ledger of its own.
	if _, err := os.Stat(filepath.Join(w.state, "drover", "drover.db")); err == nil {
		t.Error("the nested drover made a ledger in its own state directory")
	}
	adaptertest.NoProcessIn(t, w.cwd)
	w.noDroverLeft()
}

func cost(u drover.Usage) float64 {
	if u.TotalCostUSD == nil {
		return 0
	}
	return *u.TotalCostUSD
}

// loggedRules reads a fakemodel request log and returns the rules that
// answered, in order.
func loggedRules(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r fakemodel.Request
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if r.Rule != "" {
			rules = append(rules, r.Rule)
		}
	}
	return rules
}

// TestMCP1_CancelTheParentEndsTheNestedRun: SIGINT to the outer drover
// while the nested Codex run waits for its model: the Claude run is
// cancelled, which ends its drover mcp, which ends the Codex run before
// it exits; the ledger shows both ended, the child no later than its
// parent, and no process is left.
func TestMCP1_CancelTheParentEndsTheNestedRun(t *testing.T) {
	w := newMCPWorld(t)
	script := w.write("script.json", strings.Replace(mcpScript, `"text":"hello from codex"`, `"text":"hello from codex","delayMs":120000`, 1))
	servers, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"drover": map[string]any{
		"command": w.drover, "args": []string{"mcp", "--fakemodel-script", script},
		"env": map[string]string{"XDG_STATE_HOME": w.state}}}})
	mcpConfig := w.write("mcp.json", string(servers))
	cmd := exec.Command(w.drover, "run", "--json", "--db", w.db, "--fakemodel-script", script,
		"--mcp-config", mcpConfig, "--allow", "mcp__drover__run_agent", "--cwd", w.cwd, "-a", "claude", "ask codex to say hello")
	cmd.Env = w.env()
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupted once the Codex run is going (it waits for its model).
	ctx, stop := context.WithTimeout(context.Background(), 3*time.Minute)
	defer stop()
	for !w.codexRunning(ctx) {
		if ctx.Err() != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("no codex run went on\nstdout %s\nstderr %s", stdout.String(), stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGINT)
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 130 {
		t.Fatalf("exit: %v, want 130\nstderr %s", err, stderr.String())
	}
	var claudeRun string
	for _, l := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		var ev drover.Event
		if json.Unmarshal([]byte(l), &ev) == nil && ev.RunID != "" {
			claudeRun = ev.RunID
			break
		}
	}
	outer := w.show(claudeRun)
	if outer.Run.Status != store.StatusFailed || outer.Run.Error != store.ReasonCancelled || len(outer.Children) != 1 {
		t.Fatalf("claude run %+v, children %+v", outer.Run, outer.Children)
	}
	child := outer.Children[0]
	if child.Status != store.StatusFailed || child.DoneStatus != drover.StatusInterrupted || child.EndedAt.After(outer.Run.EndedAt) {
		t.Fatalf("codex run %+v; claude's ended at %v", child, outer.Run.EndedAt)
	}
	t.Logf("codex run: %s (%s)", child.Status, child.Error)
	adaptertest.NoProcessIn(t, w.cwd)
	w.noDroverLeft()
	// Exited members waiting for this container's init to reap them
	// (zombies) are not alive.
	if proc.GroupAlive(child.Pgid) {
		t.Errorf("codex's process group %d is still there: %s", child.Pgid, groupMembers(child.Pgid))
	}
}

// codexRunning reports whether the ledger has a codex run that is
// running and has recorded an event.
func (w *mcpWorld) codexRunning(ctx context.Context) bool {
	if _, err := os.Stat(w.db); err != nil {
		return false
	}
	st, err := sqlite.Open(ctx, w.db)
	if err != nil {
		return false
	}
	defer st.Close()
	rs, err := st.ListRuns(ctx, store.RunFilter{Agent: codex.ID, Status: []store.RunStatus{store.StatusRunning}})
	return err == nil && len(rs) == 1 && rs[0].LastSeq > 0
}

// groupMembers describes the processes of group pgid: pid, state, command.
func groupMembers(pgid int) string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid pgrp …; comm may hold spaces.
		rest := string(stat[strings.LastIndexByte(string(stat), ')')+2:])
		f := strings.Fields(rest)
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			out = append(out, fmt.Sprintf("%s %s ppid %s %q", e.Name(), f[0], f[1], strings.ReplaceAll(string(cmd), "\x00", " ")))
		}
	}
	return strings.Join(out, "; ")
}
