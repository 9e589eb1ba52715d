package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/store"
)

// TestSUP1_OneMeaningOfSupervisedOnEveryVendor: the real CLIs in the
// supervised tier, with nobody to ask (stdin is /dev/null), each run
// `ls` then `touch made.txt`: `ls` runs without asking on every vendor
// (the vendor did not ask, or drover's read-only rule answered it), and
// `touch` is asked about and so denied: made.txt is not made. The summary
// line and the ledger say one call was denied.
func TestSUP1_OneMeaningOfSupervisedOnEveryVendor(t *testing.T) {
	droverBin := buildDrover(t)
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			t.Parallel()
			w := newContainWorld(t, droverBin, agent)
			script := w.write("script.json", `{"rules":[{"match":"look","steps":[{"tools":[{"shell":"ls"}]},
  {"tools":[{"shell":"touch made.txt"}]},{"text":"looked"}]}]}`)
			stdout, stderr, code := w.droverCmd("run", "--fakemodel-script", script, "-a", agent, "look around")
			if code != 0 {
				t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
			}
			if _, err := os.Stat(filepath.Join(w.ws, "made.txt")); err == nil {
				t.Errorf("touch ran without an answer:\n%s", stdout)
			}
			id := startedRun.FindStringSubmatch(stderr)[2]
			out, _, _ := w.droverCmd("show", "--json", id)
			var s struct {
				Run       store.Run        `json:"run"`
				ToolCalls []store.ToolCall `json:"toolCalls"`
			}
			if err := json.Unmarshal([]byte(out), &s); err != nil {
				t.Fatal(err)
			}
			var ls, touch *store.ToolCall
			for i, c := range s.ToolCalls {
				var in struct{ Command, Cmd any }
				_ = json.Unmarshal(c.Input, &in)
				cmd, _ := json.Marshal([]any{in.Command, in.Cmd})
				switch {
				case strings.Contains(string(cmd), "touch made.txt"):
					touch = &s.ToolCalls[i]
				case strings.Contains(string(cmd), "ls"):
					ls = &s.ToolCalls[i]
				}
			}
			if ls == nil || touch == nil {
				t.Fatalf("tool calls %+v\n%s", s.ToolCalls, stdout)
			}
			if ls.Status != drover.ToolSuccess || (ls.Permission != nil && (ls.Permission.Behavior != drover.Allow || ls.Permission.Detail != engine.ReadOnlyRule)) {
				t.Errorf("ls: %s, permission %+v: want run without asking", ls.Status, ls.Permission)
			}
			if touch.Permission == nil || touch.Permission.Behavior != drover.Deny || touch.Status != drover.ToolDenied {
				t.Errorf("touch: %s, permission %+v: want asked and denied", touch.Status, touch.Permission)
			}
			if s.Run.Denied != 1 || s.Run.Outcome() != drover.OutcomeCompleted {
				t.Errorf("ledger: %d denied, outcome %s", s.Run.Denied, s.Run.Outcome())
			}
			if !strings.Contains(stdout, "1 denied") {
				t.Errorf("the summary does not say a call was denied:\n%s", stdout)
			}
		})
	}
}
