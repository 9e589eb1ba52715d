package e2e

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	droverruns "github.com/drover-run/drover/runs"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/store"
	_ "modernc.org/sqlite" // reads the ledger's compactions view
)

// failoverWorld is drover's CLI with two credential profiles for claude
// (keys A and B) and a fakemodel script that rate limits key A.
type failoverWorld struct {
	t                                    *testing.T
	drover                               string
	env                                  []string
	dir, ws, db, script, log, keyA, keyB string
}

const failoverScript = `{"rules":[
  {"name":"limited","apiKey":"sk-test-profile-a-0001","match":"","steps":[{"error":{"status":429,"message":"this key is rate limited"}}]},
  {"name":"tool-then-limited","match":"(?i)tool first","steps":[{"tools":[{"shell":"echo ran > ran.txt"}]},{"error":{"status":429,"message":"rate limited after a tool"}}]},
  {"name":"hello","match":"","steps":[{"text":"hello from the next link"}]}
]}`

func newFailoverWorld(t *testing.T) *failoverWorld {
	t.Helper()
	w := &failoverWorld{t: t, drover: buildDrover(t), dir: t.TempDir(), keyA: "sk-test-profile-a-0001", keyB: "sk-test-profile-b-0002"}
	home := filepath.Join(w.dir, "home")
	w.ws, w.db = filepath.Join(w.dir, "ws"), filepath.Join(w.dir, "state", "ledger.db")
	for _, d := range []string{home, w.ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w.script, w.log = filepath.Join(w.dir, "script.json"), filepath.Join(w.dir, "requests.jsonl")
	if err := os.WriteFile(w.script, []byte(failoverScript), 0o600); err != nil {
		t.Fatal(err)
	}
	w.env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(w.dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(home, ".config"),
		"DROVER_CLAUDE_BIN="+claudeBin(t), codex.BinaryEnv+"="+vendorBin(t, "codex", codex.BinaryEnv),
		"KEY_A="+w.keyA, "KEY_B="+w.keyB)
	w.drv(0, "profiles", "add", "a", "--agent", "claude", "--from-env", "ANTHROPIC_API_KEY=KEY_A")
	w.drv(0, "profiles", "add", "b", "--agent", "claude", "--from-env", "ANTHROPIC_API_KEY=KEY_B")
	return w
}

// drv runs drover with args and wants exit code want; it returns stdout.
func (w *failoverWorld) drv(want int, args ...string) string {
	w.t.Helper()
	cmd := exec.Command(w.drover, args...)
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
	if code != want {
		w.t.Fatalf("drover %v: exit %d, want %d\n%s\n%s", args, code, want, out, stderr.String())
	}
	for _, k := range []string{w.keyA, w.keyB} {
		if strings.Contains(string(out), k) || strings.Contains(stderr.String(), k) {
			w.t.Errorf("drover %v printed a profile's key", args)
		}
	}
	return string(out)
}

// run runs drover run --json offline against the script and returns the
// events it printed, then the same run's events from the ledger.
func (w *failoverWorld) run(want int, args ...string) (printed, recorded []drover.Event) {
	w.t.Helper()
	out := w.drv(want, append([]string{"run", "--json", "--db", w.db, "--cwd", w.ws, "--fakemodel-script", w.script,
		"--fakemodel-log", w.log, "-a", "claude"}, args...)...)
	printed = decodeLines(w.t, out)
	w.t.Logf("%v: %v", args, typesOf(printed))
	if len(printed) == 0 || printed[0].RunID == "" {
		w.t.Fatalf("no run id in %v", printed)
	}
	recorded = decodeLines(w.t, w.drv(0, "logs", "--json", "--db", w.db, printed[0].RunID))
	if len(recorded) != len(printed) {
		w.t.Errorf("ledger holds %d events, drover printed %d", len(recorded), len(printed))
	}
	files, _ := filepath.Glob(w.db + "*")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		for _, k := range []string{w.keyA, w.keyB} {
			if strings.Contains(string(data), k) {
				w.t.Errorf("ledger file %s holds a profile's key", f)
			}
		}
	}
	noClaudeIn(w.t, w.ws)
	return printed, recorded
}

func decodeLines(t *testing.T, out string) []drover.Event {
	t.Helper()
	var evs []drover.Event
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l == "" {
			continue
		}
		var ev drover.Event
		if err := json.Unmarshal([]byte(l), &ev); err != nil {
			t.Fatalf("not a UES event: %q: %v", l, err)
		}
		evs = append(evs, ev)
	}
	return evs
}

func recoverableErrors(evs []drover.Event) []drover.Event {
	var out []drover.Event
	for _, e := range evs {
		if p, ok := e.Payload.(drover.ErrorPayload); ok && p.Recoverable {
			out = append(out, e)
		}
	}
	return out
}

// attemptsIn returns done's metadata.attempts as JSON decoded them.
func attemptsIn(t *testing.T, evs []drover.Event) []map[string]any {
	t.Helper()
	d := evs[len(evs)-1]
	raw, _ := json.Marshal(d.Metadata["attempts"])
	var att []map[string]any
	if err := json.Unmarshal(raw, &att); err != nil || len(att) == 0 {
		t.Fatalf("done metadata %+v: no attempts", d.Metadata)
	}
	return att
}

func countType(evs []drover.Event, typ drover.EventType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

// TestFAIL1_ClaudeProfileFailover: the real claude is rate limited on
// profile a's key; drover switches to profile b, which succeeds. The run
// shows one recoverable error naming the switch, both attempts are in the
// ledger, and neither key is printed or recorded.
func TestFAIL1_ClaudeProfileFailover(t *testing.T) {
	w := newFailoverWorld(t)
	printed, recorded := w.run(0, "--tier", "dry-run", "--profile", "a,b", "say hello")
	for name, evs := range map[string][]drover.Event{"printed": printed, "ledger": recorded} {
		if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "hello from the next link" {
			t.Errorf("%s: done %+v", name, d)
		}
		rec := recoverableErrors(evs)
		if len(rec) != 1 {
			t.Fatalf("%s: %d recoverable errors, want 1: %v", name, len(rec), typesOf(evs))
		}
		if p := rec[0].Payload.(drover.ErrorPayload); p.Code != drover.CodeRateLimited || !strings.Contains(p.Message, "trying profile b") {
			t.Errorf("%s: switch %+v", name, p)
		}
		if n := countType(evs, drover.TypeInit); n != 2 {
			t.Errorf("%s: %d init events, want one per attempt", name, n)
		}
		att := attemptsIn(t, evs)
		if len(att) != 2 || att[0]["profile"] != "a" || att[0]["code"] != "RATE_LIMITED" || att[1]["profile"] != "b" || att[1]["status"] != "success" {
			t.Errorf("%s: attempts %v", name, att)
		}
	}
	reqs := readRequestLog(t, w.log)
	if len(reqs) != 2 || reqs[0].Rule != "limited" || reqs[0].Status != 429 || reqs[1].Rule != "hello" {
		t.Errorf("requests %+v", reqs)
	}
}

// TestFAIL1_ClaudeRateLimitAfterToolNotRetried: a 429 after a tool ran
// fails the run, saying why, and no other profile is tried.
func TestFAIL1_ClaudeRateLimitAfterToolNotRetried(t *testing.T) {
	w := newFailoverWorld(t)
	printed, _ := w.run(1, "--tier", "autonomous", "--profile", "b,a", "tool first")
	if d := doneOf(t, printed); d.Status != drover.StatusError {
		t.Fatalf("done %+v", d)
	}
	if _, err := os.Stat(filepath.Join(w.ws, "ran.txt")); err != nil {
		t.Fatalf("the tool did not run: %v", err)
	}
	if rec := recoverableErrors(printed); len(rec) != 0 {
		t.Errorf("recoverable errors %v", rec)
	}
	var last drover.ErrorPayload
	for _, p := range payloads[drover.ErrorPayload](printed) {
		last = p
	}
	if last.Code != drover.CodeRateLimited || !strings.Contains(last.Message, "not retried: a tool had already run") {
		t.Errorf("error %+v", last)
	}
	if att := attemptsIn(t, printed); len(att) != 1 || att[0]["profile"] != "b" {
		t.Errorf("attempts %v", att)
	}
	for _, r := range readRequestLog(t, w.log) {
		if r.Rule == "limited" {
			t.Errorf("profile a was tried: %+v", r)
		}
	}
}

// TestFAIL1_ClaudeFallsBackToCodex: a chain that ends in an agent
// fallback runs the real Codex CLI after claude's only profile is rate
// limited.
func TestFAIL1_ClaudeFallsBackToCodex(t *testing.T) {
	w := newFailoverWorld(t)
	printed, recorded := w.run(0, "--tier", "dry-run", "--profile", "a", "--fallback", "codex", "say hello")
	for name, evs := range map[string][]drover.Event{"printed": printed, "ledger": recorded} {
		d := doneOf(t, evs)
		if d.Status != drover.StatusSuccess || evs[len(evs)-1].Agent != codex.ID {
			t.Fatalf("%s: done by %s: %+v", name, evs[len(evs)-1].Agent, d)
		}
		rec := recoverableErrors(evs)
		if len(rec) != 1 || !strings.Contains(rec[0].Payload.(drover.ErrorPayload).Message, "trying agent codex") {
			t.Fatalf("%s: switches %v", name, rec)
		}
		texts := payloads[drover.TextPayload](evs)
		if len(texts) == 0 || texts[len(texts)-1].Content != "hello from the next link" {
			t.Errorf("%s: texts %+v", name, texts)
		}
		att := attemptsIn(t, evs)
		if len(att) != 2 || att[0]["agent"] != "claude-code" || att[1]["agent"] != codex.ID || att[1]["status"] != "success" {
			t.Errorf("%s: attempts %v", name, att)
		}
	}
	reqs := readRequestLog(t, w.log)
	if len(reqs) < 2 || reqs[0].API != "anthropic" || reqs[0].Status != 429 || reqs[len(reqs)-1].API != "openai-responses" || reqs[len(reqs)-1].Rule != "hello" {
		t.Errorf("requests %+v", reqs)
	}
}

// readRequestLog reads a fakemodel request log (one JSON line a request).
func readRequestLog(t *testing.T, path string) []requestLine {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []requestLine
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var r requestLine
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("request log line %q: %v", l, err)
		}
		if r.Aux == "" {
			out = append(out, r)
		}
	}
	return out
}

type requestLine struct {
	API    string `json:"api"`
	Model  string `json:"model"`
	Rule   string `json:"rule"`
	Status int    `json:"status"`
	Aux    string `json:"aux"`
}

const overflowScript = `{"rules":[
  {"name":"summarize","match":"(?s)^CRITICAL: Respond with TEXT ONLY","steps":[{"text":"<summary>The user asked to remember 7, then to say hello.</summary>"}]},
  {"name":"remember","match":"remember","steps":[{"text":"I will remember 7."}]},
  {"name":"after-compact","history":"continued from a previous conversation","match":"say hello","steps":[{"text":"hello after compaction"}]},
  {"name":"overflow","match":"say hello","steps":[{"error":{"status":400,"message":"prompt is too long: 250000 tokens > 200000 maximum"}}]}
]}`

// compactionsIn returns the compact_metadata of every claude-code:compact
// event of evs.
func compactionsIn(evs []drover.Event) []map[string]any {
	var out []map[string]any
	for _, e := range evs {
		if e.Type != "claude-code:compact" {
			continue
		}
		raw, _ := json.Marshal(e.Payload)
		var p struct {
			Meta map[string]any `json:"compact_metadata"`
		}
		if json.Unmarshal(raw, &p) == nil && p.Meta != nil {
			out = append(out, p.Meta)
		}
	}
	return out
}

// TestFAIL1_ClaudeContextOverflowCompacts: the second turn of a session
// overflows the context. With Claude's own automatic compaction off, drover
// compacts the session with /compact and retries once: a recoverable
// CONTEXT_OVERFLOW, the compaction (trigger manual, tokens before and
// after) in the stream and the ledger, and the retry succeeds. With it on,
// Claude compacts by itself (trigger auto), and that is recorded too.
func TestFAIL1_ClaudeContextOverflowCompacts(t *testing.T) {
	for _, tc := range []struct {
		name, env, trigger string
		byDrover           bool
	}{
		{"drover compacts", "DISABLE_AUTO_COMPACT=1", "manual", true},
		{"claude compacts by itself", "", "auto", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newFailoverWorld(t)
			if err := os.WriteFile(w.script, []byte(overflowScript), 0o600); err != nil {
				t.Fatal(err)
			}
			if tc.env != "" {
				w.env = append(w.env, tc.env)
			}
			first, _ := w.run(0, "--tier", "dry-run", "remember 7")
			printed, recorded := w.run(0, "--tier", "dry-run", "--session", first[0].SessionID, "say hello")
			for name, evs := range map[string][]drover.Event{"printed": printed, "ledger": recorded} {
				if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "hello after compaction" {
					t.Fatalf("%s: done %+v", name, d)
				}
				comp := compactionsIn(evs)
				if len(comp) != 1 || comp[0]["trigger"] != tc.trigger || comp[0]["pre_tokens"] == nil || comp[0]["post_tokens"] == nil {
					t.Errorf("%s: compactions %v, want one %s with tokens before and after", name, comp, tc.trigger)
				}
				rec := recoverableErrors(evs)
				if !tc.byDrover {
					if len(rec) != 0 {
						t.Errorf("%s: drover intervened: %v", name, rec)
					}
					continue
				}
				if len(rec) != 1 || rec[0].Payload.(drover.ErrorPayload).Code != drover.CodeContextOverflow ||
					!strings.Contains(rec[0].Payload.(drover.ErrorPayload).Message, "compacting its session (/compact) and retrying once") {
					t.Fatalf("%s: recoverable errors %v", name, rec)
				}
				att := attemptsIn(t, evs)
				if len(att) != 3 || att[0]["code"] != "CONTEXT_OVERFLOW" || att[1]["kind"] != "compaction" || att[2]["status"] != "success" {
					t.Errorf("%s: attempts %v", name, att)
				}
			}
			var rules []string
			for _, r := range readRequestLog(t, w.log) {
				rules = append(rules, r.Rule)
			}
			if want := "remember overflow summarize after-compact"; strings.Join(rules, " ") != want {
				t.Errorf("requests %v, want %s", rules, want)
			}
			// The ledger's compactions record: one row for the session.
			db, err := sql.Open("sqlite", "file:"+w.db+"?mode=ro")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var (
				n, before, after int64
				trigger, run     string
			)
			err = db.QueryRow(`SELECT COUNT(*), MAX(trigger), MAX(tokens_before), MAX(tokens_after), MAX(run_id) FROM compactions WHERE session_id = ?`,
				first[0].SessionID).Scan(&n, &trigger, &before, &after, &run)
			if err != nil || n != 1 || trigger != tc.trigger || before <= 0 || after <= 0 || run != printed[0].RunID {
				t.Errorf("compactions of session %s: %d rows, %s %d→%d in %s (%v)", first[0].SessionID, n, trigger, before, after, run, err)
			}
		})
	}
}

// TestFAIL1_ClaudeModelFallback: with both profiles, the first model is
// overloaded; drover tries profile b on it, then the fallback model with
// profile a, which answers.
func TestFAIL1_ClaudeModelFallback(t *testing.T) {
	w := newFailoverWorld(t)
	script := `{"rules":[
  {"name":"busy","model":"claude-busy-1","match":"","steps":[{"error":{"status":529,"message":"overloaded"}}]},
  {"name":"hello","match":"","steps":[{"text":"hello from the next link"}]}]}`
	if err := os.WriteFile(w.script, []byte(script), 0o600); err != nil {
		t.Fatal(err)
	}
	printed, recorded := w.run(0, "--tier", "dry-run", "--model", "claude-busy-1", "--model-fallback", "claude-free-2", "--profile", "a,b", "say hello")
	for name, evs := range map[string][]drover.Event{"printed": printed, "ledger": recorded} {
		if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
			t.Fatalf("%s: done %+v", name, d)
		}
		var msgs []string
		for _, e := range recoverableErrors(evs) {
			p := e.Payload.(drover.ErrorPayload)
			if p.Code != drover.CodeOverloaded {
				t.Errorf("%s: switch code %s", name, p.Code)
			}
			msgs = append(msgs, p.Message)
		}
		if len(msgs) != 2 || !strings.Contains(msgs[0], "trying profile b") || !strings.Contains(msgs[1], "trying model claude-free-2 with a") {
			t.Errorf("%s: switches %q", name, msgs)
		}
		att := attemptsIn(t, evs)
		if len(att) != 3 || att[2]["model"] != "claude-free-2" || att[2]["profile"] != "a" || att[2]["status"] != "success" {
			t.Errorf("%s: attempts %v", name, att)
		}
	}
	var models []string
	for _, r := range readRequestLog(t, w.log) {
		models = append(models, r.Model+":"+r.Rule)
	}
	if want := "claude-busy-1:busy claude-busy-1:busy claude-free-2:hello"; strings.Join(models, " ") != want {
		t.Errorf("requests %v, want %s", models, want)
	}
}

// TestSEC3_FailoverProfilesThroughProtocol: a client of drover serve
// --stdio passes a failover chain with two profiles' keys; the real claude
// is rate limited on the first and answers on the second. Neither key is in
// any response (run, await, get, events), in the ledger's files or on
// drover's stderr; get shows the profiles with their values redacted.
func TestSEC3_FailoverProfilesThroughProtocol(t *testing.T) {
	bin := claudeBin(t)
	droverBin := buildDrover(t)
	const keyA, keyB = "sk-test-protocol-a-0003", "sk-test-protocol-b-0004"
	script, err := fakemodel.ParseScript([]byte(`{"rules":[
		{"apiKey":"` + keyA + `","match":"","steps":[{"error":{"status":429,"message":"slow down"}}]},
		{"match":"","steps":[{"text":"hello from key b"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fm := fakemodel.New(script)
	url, err := fm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Close() })
	home := t.TempDir()
	db := filepath.Join(home, "state", "drover.db")
	// The run names the pinned binary and a home of its own: options only
	// the server's operator may allow (SEC-5).
	cmd := exec.Command(droverBin, "serve", "--stdio", "--allow-autonomous", "--db", db)
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := protocol.NewClient(stdout, stdin)
	t.Cleanup(func() {
		c.Close()
		cmd.Process.Kill()
		cmd.Wait()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	zero := 0
	var seen []any // every response, to search for the keys
	res, err := c.Run(ctx, api.RunParams{Agent: "claude", Prompt: "say hello", Options: &drover.Options{
		Binary: bin, Cwd: t.TempDir(), Tier: drover.TierDryRun, Timeout: time.Minute,
		Endpoint: &drover.Endpoint{BaseURL: url}, APIRetries: &zero, ConfigDir: filepath.Join(home, "claude"),
		Env: map[string]string{"HOME": home},
		Failover: &drover.Failover{Profiles: []drover.Profile{
			{Name: "a", Agent: "claude", Env: map[string]string{"ANTHROPIC_API_KEY": keyA}},
			{Name: "b", Agent: "claude", Env: map[string]string{"ANTHROPIC_API_KEY": keyB}}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, res)
	aw, err := c.Await(ctx, api.AwaitParams{Runs: []string{res.RunID}})
	if err != nil {
		t.Fatal(err)
	}
	runs := aw.Runs
	seen = append(seen, runs)
	if runs[0].Status != store.StatusCompleted {
		t.Fatalf("run %+v\n%s", runs[0], stderr.String())
	}
	got, err := c.Get(ctx, api.GetParams{RunID: res.RunID})
	if err != nil {
		t.Fatal(err)
	}
	evs, err := c.Events(ctx, api.EventsParams{RunID: res.RunID})
	if err != nil {
		t.Fatal(err)
	}
	seen = append(seen, got, evs)
	all, err := json.Marshal(seen)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{keyA, keyB} {
		if strings.Contains(string(all), k) || strings.Contains(stderr.String(), k) {
			t.Errorf("a profile's key reached a response or drover's stderr")
		}
	}
	if !strings.Contains(string(all), `"ANTHROPIC_API_KEY":"`+droverruns.Redacted+`"`) {
		t.Errorf("get does not show the profiles redacted: %.2000s", all)
	}
	if !strings.Contains(string(all), "trying profile b") || !strings.Contains(string(all), "hello from key b") {
		t.Errorf("the run did not fail over: %.3000s", all)
	}
	files, _ := filepath.Glob(db + "*")
	for _, f := range files {
		data, _ := os.ReadFile(f)
		if strings.Contains(string(data), keyA) || strings.Contains(string(data), keyB) {
			t.Errorf("ledger file %s holds a profile's key", f)
		}
	}
}
