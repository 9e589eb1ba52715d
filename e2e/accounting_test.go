package e2e

import (
	"encoding/json"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/adapter/opencode"
)

// ACC-1: a run's usage is the run's own, never a session's running total.

// accWorld is an offline drover home for runs through the real drover
// CLI (the supervisor and its ledger): `drover run --fakemodel-script`,
// whose agents' configuration home ($XDG_STATE_HOME/drover/fakemodel-home)
// is kept between runs, so that one run can resume another.
type accWorld struct {
	t       *testing.T
	drover  string
	dir, ws string
	script  string
	env     []string
}

func newAccWorld(t *testing.T, script string, env ...string) *accWorld {
	t.Helper()
	dir := t.TempDir()
	w := &accWorld{t: t, drover: buildDrover(t), dir: dir, ws: filepath.Join(dir, "ws"), script: filepath.Join(dir, "script.json")}
	home := filepath.Join(dir, "home")
	for _, d := range []string{home, w.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(w.script, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "DROVER_DB="+filepath.Join(dir, "drover.db"), "DROVER_PRICES=")
	w.env = append(w.env, env...)
	return w
}

// run is `drover run --json` of agent on prompt with args, offline; it
// wants exit code want and returns the done event (with its run id).
func (w *accWorld) run(agent, prompt string, want int, args ...string) drover.Event {
	w.t.Helper()
	cmd := exec.Command(w.drover, append(append([]string{"run", "--json", "--tier", "autonomous", "--cwd", w.ws,
		"--fakemodel-script", w.script, "-a", agent}, args...), prompt)...)
	cmd.Env = w.env
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatal(err)
	}
	evs := decodeLines(w.t, string(out))
	w.t.Logf("%s %v %q: exit %d, %v", agent, args, prompt, code, typesOf(evs))
	if code != want {
		w.t.Fatalf("exit %d, want %d\n%s\n%s", code, want, out, stderr.String())
	}
	doneOf(w.t, evs)
	ev := evs[len(evs)-1]
	if ev.RunID == "" || ev.SessionID == "" {
		w.t.Fatalf("done without its run and session: %+v", ev)
	}
	return ev
}

// recorded is the usage the ledger keeps for run id (`drover show --json`).
func (w *accWorld) recorded(id string) drover.Usage {
	w.t.Helper()
	cmd := exec.Command(w.drover, "show", "--json", id)
	cmd.Env = w.env
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("drover show %s: %v\n%s", id, err, out)
	}
	var v struct {
		Run struct {
			Usage drover.Usage `json:"usage"`
		} `json:"run"`
	}
	if err := json.Unmarshal(out, &v); err != nil {
		w.t.Fatalf("drover show %s: %v\n%s", id, err, out)
	}
	return v.Run.Usage
}

func doneUsage(t *testing.T, ev drover.Event) drover.DonePayload {
	t.Helper()
	d, ok := ev.Done()
	if !ok {
		t.Fatalf("not a done: %+v", ev)
	}
	return d
}

func costIs(got *float64, want float64) bool { return got != nil && math.Abs(*got-want) < 1e-12 }

func costString(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}

// TestACC1_ResumedClaudeCostIsItsOwn: the real claude reports a resumed
// run's total_cost_usd as the session's running total. A run that resumes
// another with a raw --resume TOKEN (a new drover session: the supervisor
// knows nothing of the conversation's cost before) records its own
// response's cost — the cost of the same response in a fresh run — not
// the sum; the session's total is in done metadata sessionCostUsd. A run
// continuing a drover session (--session) records its own cost too.
func TestACC1_ResumedClaudeCostIsItsOwn(t *testing.T) {
	w := newAccWorld(t, `{"rules":[
 {"match":"first","steps":[{"text":"one","usage":{"input":1000,"output":100}}]},
 {"match":"second","steps":[{"text":"two","usage":{"input":2000,"output":200}}]}]}`,
		claude.BinaryEnv+"="+claudeBin(t))
	first := w.run("claude", "first prompt", 0)
	d1 := doneUsage(t, first)
	resumed := w.run("claude", "second prompt", 0, "--resume", d1.ResumeToken)
	d2 := doneUsage(t, resumed)
	fresh := doneUsage(t, w.run("claude", "second prompt", 0))
	if d1.Usage.TotalCostUSD == nil || fresh.Usage.TotalCostUSD == nil || *fresh.Usage.TotalCostUSD <= 0 {
		t.Fatalf("costs: first %v, fresh %v", costString(d1.Usage.TotalCostUSD), costString(fresh.Usage.TotalCostUSD))
	}
	own, sum := *fresh.Usage.TotalCostUSD, *d1.Usage.TotalCostUSD+*fresh.Usage.TotalCostUSD
	if d2.ResumeToken != d1.ResumeToken {
		t.Fatalf("the resumed run's session %s, want %s (a continued conversation)", d2.ResumeToken, d1.ResumeToken)
	}
	if !costIs(d2.Usage.TotalCostUSD, own) {
		t.Errorf("resumed run's cost %v, want its own response's %v (the session's total is %v)", costString(d2.Usage.TotalCostUSD), own, sum)
	}
	if got, _ := resumed.Metadata[drover.MetaSessionCostUSD].(float64); math.Abs(got-sum) > 1e-12 {
		t.Errorf("metadata %s %v, want the session's total %v", drover.MetaSessionCostUSD, resumed.Metadata[drover.MetaSessionCostUSD], sum)
	}
	if d2.Usage.InputTokens != 2000 || d2.Usage.OutputTokens != 200 {
		t.Errorf("resumed run's tokens %d/%d, want its own 2000/200", d2.Usage.InputTokens, d2.Usage.OutputTokens)
	}
	if got := w.recorded(resumed.RunID).TotalCostUSD; !costIs(got, own) {
		t.Errorf("the ledger records the resumed run's cost as %v, want %v", costString(got), own)
	}

	// The drover session of the first run, whose conversation the
	// resumed run continued outside it: its next run is still its own
	// response's cost (not the session's total less the first's).
	third := w.run("claude", "second prompt", 0, "--session", first.SessionID)
	if got := w.recorded(third.RunID).TotalCostUSD; !costIs(got, own) {
		t.Errorf("the ledger records a --session run after an outside --resume as %v, want %v", costString(got), own)
	}

	// The same through a drover session: its supervisor counts the share.
	start := w.run("claude", "first prompt", 0)
	cont := w.run("claude", "second prompt", 0, "--session", start.SessionID)
	if got := doneUsage(t, cont).Usage.TotalCostUSD; !costIs(got, own) {
		t.Errorf("--session run's cost %v, want %v", costString(got), own)
	}
	if got := w.recorded(cont.RunID).TotalCostUSD; !costIs(got, own) {
		t.Errorf("the ledger records the --session run's cost as %v, want %v", costString(got), own)
	}
}

// accOpenCodeScript: three responses of 1000 input and 100 output tokens
// (two shell calls, then a text), and a one-response rule for a run that
// resumes the session.
const accOpenCodeScript = `{"rules":[
 {"match":"loop","steps":[
  {"tools":[{"shell":"echo 1 > t1.txt"}],"usage":{"input":1000,"output":100}},
  {"tools":[{"shell":"echo 2 > t2.txt"}],"usage":{"input":1000,"output":100}},
  {"text":"end","usage":{"input":1000,"output":100}}]},
 {"match":"again","steps":[{"text":"again done","usage":{"input":500,"output":50}}]}]}`

// TestACC1_OpenCodeSumsEveryResponse: a live OpenCode run (every drover
// run is one: `opencode acp`) of three model responses with 1000/100
// tokens each records 3000/300 in 3 turns — OpenCode's answer to the
// prompt says 1000/100, the last response's; a run resuming that session
// records its own response only (500/50), not the session's; and a budget
// the three responses cross together (drover prices them: $0.006 at $1
// and $10 per million) ends the run max_budget, which one response's
// tokens ($0.002) never did.
func TestACC1_OpenCodeSumsEveryResponse(t *testing.T) {
	w := newAccWorld(t, accOpenCodeScript, opencode.BinaryEnv+"="+vendorBin(t, "opencode", opencode.BinaryEnv))
	check := func(name string, ev drover.Event, in, out, turns int64) {
		t.Helper()
		for what, u := range map[string]drover.Usage{"done": doneUsage(t, ev).Usage, "ledger": w.recorded(ev.RunID)} {
			if u.InputTokens != in || u.OutputTokens != out || u.Turns == nil || *u.Turns != turns {
				t.Errorf("%s: %s usage %+v (turns %v), want %d/%d in %d turns", name, what, u, u.Turns, in, out, turns)
			}
		}
	}
	first := w.run("opencode", "loop please", 0)
	check("three responses", first, 3000, 300, 3)
	for _, f := range []string{"t1.txt", "t2.txt"} {
		if !exists(w.ws, f) {
			t.Errorf("%s missing: the responses' commands did not run", f)
		}
	}
	again := w.run("opencode", "again please", 0, "--resume", doneUsage(t, first).ResumeToken)
	if doneUsage(t, again).ResumeToken != doneUsage(t, first).ResumeToken {
		t.Fatalf("resumed run's session %s, want %s", doneUsage(t, again).ResumeToken, doneUsage(t, first).ResumeToken)
	}
	check("resumed", again, 500, 50, 1)

	prices := filepath.Join(w.dir, "prices.json")
	if err := os.WriteFile(prices, []byte(`{"default":{"input":1,"output":10}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	over := doneUsage(t, w.run("opencode", "loop please", 1, "--prices", prices, "--max-budget-usd", "0.005"))
	if over.Status != drover.StatusMaxBudget || !costIs(over.Usage.TotalCostUSD, 0.006) {
		t.Fatalf("over budget: done %+v (cost %v), want max_budget at $0.006", over, costString(over.Usage.TotalCostUSD))
	}
}

// TestACC1_ResumedOpenCodeCostIsItsOwn: OpenCode prices a model its
// configuration gives a cost (here $1 and $10 per million tokens, and a
// context limit, without which it sends no usage_update) and reports the
// session's running cost after the prompt, having reported none while
// session/load replayed the session. A run resuming a session with a raw
// --resume TOKEN records its own responses' cost ($0.001 for 500/50), not
// the session's ($0.007 with the first run's $0.006), which stays metadata
// sessionCostUsd.
func TestACC1_ResumedOpenCodeCostIsItsOwn(t *testing.T) {
	w := newAccWorld(t, accOpenCodeScript, opencode.BinaryEnv+"="+vendorBin(t, "opencode", opencode.BinaryEnv))
	priced := "OPENCODE_CONFIG_CONTENT=" +
		`{"provider":{"drover":{"models":{"default":{"cost":{"input":1,"output":10},"limit":{"context":100000,"output":8000}}}}}}`
	first := w.run("opencode", "loop please", 0, "--env", priced)
	if got := doneUsage(t, first).Usage.TotalCostUSD; !costIs(got, 0.006) {
		t.Fatalf("first run's cost %v, want $0.006 (3000/300)", costString(got))
	}
	again := w.run("opencode", "again please", 0, "--env", priced, "--resume", doneUsage(t, first).ResumeToken)
	d := doneUsage(t, again)
	if !costIs(d.Usage.TotalCostUSD, 0.001) || d.Usage.CostEstimated {
		t.Errorf("resumed run's cost %v (estimated %v), want its own $0.001, as OpenCode priced it", costString(d.Usage.TotalCostUSD), d.Usage.CostEstimated)
	}
	if got, _ := again.Metadata[drover.MetaSessionCostUSD].(float64); math.Abs(got-0.007) > 1e-12 {
		t.Errorf("metadata %s %v, want the session's $0.007", drover.MetaSessionCostUSD, again.Metadata[drover.MetaSessionCostUSD])
	}
	if got := w.recorded(again.RunID).TotalCostUSD; !costIs(got, 0.001) {
		t.Errorf("the ledger records the resumed run's cost as %v, want $0.001", costString(got))
	}
}
