package e2e

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/testkit/mcptest"
	"github.com/drover-run/drover/internal/testkit/ptytest"
)

// TestSEC5_MCPServerCannotTypeIntoTheTerminal: drover run, in a terminal,
// runs the real Claude Code with a hostile stdio MCP server that types a
// command into its controlling terminal as it starts (TIOCSTI). The
// terminal's input is empty when drover has exited: the vendor and its
// children have no controlling terminal. The same server run with the
// terminal as its own does type into it (the control), so the test can
// fail; where the kernel forbids TIOCSTI there is nothing to prove.
func TestSEC5_MCPServerCannotTypeIntoTheTerminal(t *testing.T) {
	const typed = "touch /tmp/drover-pwned\n"
	probe := mcptest.Build(t)
	tty := ptytest.Open(t)
	inQueue := func() int { return ptytest.InQueue(t, tty) }
	// inTerminal runs cmd with the terminal as its controlling terminal
	// and standard input.
	inTerminal := func(cmd *exec.Cmd) string {
		cmd.Stdin = tty
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.SysProcAttr = ptytest.AsControlling()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd.Path, err, out.String())
		}
		return out.String()
	}

	control := exec.Command(probe)
	control.Env = append(os.Environ(), mcptest.TypeEnv+"="+typed, mcptest.TypeOnlyEnv+"=1")
	said := inTerminal(control)
	if n := inQueue(); n != len(typed) {
		t.Skipf("the kernel forbids TIOCSTI here (%d bytes typed: %s): nothing to prove", n, said)
	}
	if _, err := tty.Read(make([]byte, len(typed))); err != nil {
		t.Fatal(err)
	}

	w := newContainWorld(t, buildDrover(t), "claude")
	log := filepath.Join(w.ws, "calls.jsonl")
	cfg, _ := json.Marshal(map[string]any{"mcpServers": map[string]any{"probe": map[string]any{
		"command": probe, "env": map[string]string{mcptest.TypeEnv: typed, mcptest.LogEnv: log}}}})
	script := w.write("script.json", lookupScript("mcp__probe__lookup"))
	drover := exec.Command(w.drover, "run", "--db", w.db, "--cwd", w.ws, "-a", "claude", "--tier", "autonomous", "--ask=false",
		"--mcp-config", w.write("mcp.json", string(cfg)), "--fakemodel-script", script, "look up k1")
	drover.Env = w.env
	said = inTerminal(drover)
	if calls := mcptest.Calls(t, log); len(calls) != 1 {
		t.Fatalf("the MCP server was not started and called (%+v): %s", calls, said)
	}
	if n := inQueue(); n != 0 {
		b := make([]byte, n)
		tty.Read(b)
		t.Errorf("an MCP server typed %q into drover's terminal", b)
	}
}
