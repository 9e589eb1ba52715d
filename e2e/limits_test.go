package e2e

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/adapter/gemini"
)

// limitsScript loops: three responses each running one shell command that
// leaves a file, then a final answer; each response reports 100k input
// and 10k output tokens.
const limitsScript = `{"rules":[{"match":"loop","steps":[
 {"tools":[{"shell":"echo 1 > t1.txt"}],"usage":{"input":100000,"output":10000}},
 {"tools":[{"shell":"echo 2 > t2.txt"}],"usage":{"input":100000,"output":10000}},
 {"tools":[{"shell":"echo 3 > t3.txt"}],"usage":{"input":100000,"output":10000}},
 {"text":"end","usage":{"input":100000,"output":10000}}]}]}`

// limitsRun runs drover run --json for agent offline against limitsScript
// in a fresh workspace with args, wants exit code want, and returns the
// done event and the workspace.
func limitsRun(t *testing.T, agent string, want int, args ...string) (drover.DonePayload, string) {
	t.Helper()
	dir := t.TempDir()
	home, ws := filepath.Join(dir, "home"), filepath.Join(dir, "ws")
	for _, d := range []string{home, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := filepath.Join(dir, "script.json")
	if err := os.WriteFile(script, []byte(limitsScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(buildDrover(t), append([]string{"run", "--json", "--isolate", "--tier", "autonomous", "--cwd", ws,
		"--fakemodel-script", script, "-a", agent}, append(args, "loop please")...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "DROVER_PRICES=",
		claude.BinaryEnv+"="+claudeBin(t), codex.BinaryEnv+"="+vendorBin(t, "codex", codex.BinaryEnv), gemini.BinaryEnv+"="+vendorBin(t, "gemini", gemini.BinaryEnv))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	evs := decodeLines(t, string(out))
	t.Logf("%s %v: exit %d, %v", agent, args, code, typesOf(evs))
	if code != want {
		t.Fatalf("exit %d, want %d\n%s\n%s", code, want, out, stderr.String())
	}
	return doneOf(t, evs), ws
}

func exists(ws, name string) bool {
	_, err := os.Stat(filepath.Join(ws, name))
	return err == nil
}

// TestLIM_CodexMaxTurns: Codex has no turn limit; drover's ends the real
// CLI's run after two responses, their commands run and the third's not,
// where Claude's own --max-turns stops the same script (the same files);
// with room for all four responses the script succeeds on Codex.
func TestLIM_CodexMaxTurns(t *testing.T) {
	for _, agent := range []string{"codex", "claude"} {
		d, ws := limitsRun(t, agent, 1, "--max-turns", "2")
		if d.Status != drover.StatusMaxTurns {
			t.Fatalf("%s: done %+v, want max_turns", agent, d)
		}
		if !exists(ws, "t1.txt") || !exists(ws, "t2.txt") || exists(ws, "t3.txt") {
			t.Fatalf("%s: want the commands of turns 1 and 2 run, and not turn 3's", agent)
		}
		if agent == "codex" && (d.Usage.Turns == nil || *d.Usage.Turns != 2 || d.Usage.ToolUses != 2) {
			t.Fatalf("codex: usage %+v (turns %v), want 2 turns and 2 tool calls", d.Usage, d.Usage.Turns)
		}
	}
	d, ws := limitsRun(t, "codex", 0, "--max-turns", "4")
	if d.Status != drover.StatusSuccess || !exists(ws, "t3.txt") {
		t.Fatalf("under the limit: done %+v", d)
	}
}

// TestLIM_GeminiMaxBudget: Gemini reports tokens and no cost; drover
// prices them (gemini-2.5-flash: 400k input at $0.30 and 40k output at
// $2.50 per million = $0.22, estimated) and ends a run over its budget
// max_budget; a budget above the cost lets it succeed.
func TestLIM_GeminiMaxBudget(t *testing.T) {
	const want = 0.22
	for _, c := range []struct {
		budget string
		exit   int
		status drover.DoneStatus
	}{{"0.1", 1, drover.StatusMaxBudget}, {"1", 0, drover.StatusSuccess}} {
		d, _ := limitsRun(t, "gemini", c.exit, "--max-budget-usd", c.budget)
		if d.Status != c.status || d.Usage.TotalCostUSD == nil || math.Abs(*d.Usage.TotalCostUSD-want) > 1e-9 || !d.Usage.CostEstimated {
			t.Fatalf("budget %s: done %+v (cost %v), want %s at ~$%g", c.budget, d, d.Usage.TotalCostUSD, c.status, want)
		}
	}
}
