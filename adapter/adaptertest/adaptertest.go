// Package adaptertest is the conformance suite every drover adapter runs
// against its real vendor CLI, offline against fakemodel: the same scenarios
// and the same expected UES shape for every vendor (Run). It also holds the
// checks every vendor's own unit tests share: finding the CLI (Locate,
// Pinned), options → command line and environment (Flags, HasEnv),
// refused options (Refused) and config-home seeding (Seeding).
package adaptertest

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// Harness says how to run one adapter in the suite.
type Harness struct {
	// Adapter under test.
	Adapter drover.Adapter
	// Binary is the pinned vendor CLI.
	Binary string
	// UnknownResume is a well-formed resume token no session has (a UUID for
	// most vendors; OpenCode's ids look different).
	UnknownResume string
	// Configure, when set, adjusts the options of every run (e.g. a model).
	Configure func(*drover.Options)
	// Live gives every run a Control of its own, so that the engine hands
	// the adapter a Live and it drives its vendor interactively.
	Live bool
}

// world is one scenario's offline setup.
type world struct {
	t     *testing.T
	h     Harness
	fake  *fakemodel.Server
	track *tracker
	url   string
	cwd   string
	home  string
}

// tracker records when each in-flight request began, so a scenario can act
// while the model is "thinking" (fakemodel logs a request only once answered).
type tracker struct {
	next http.Handler
	mu   sync.Mutex
	live map[*http.Request]time.Time
}

func (tr *tracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tr.mu.Lock()
	tr.live[r] = time.Now()
	tr.mu.Unlock()
	defer func() {
		tr.mu.Lock()
		delete(tr.live, r)
		tr.mu.Unlock()
	}()
	tr.next.ServeHTTP(w, r)
}

// pendingFor reports whether some request has been in flight for at least d.
func (tr *tracker) pendingFor(d time.Duration) bool {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, began := range tr.live {
		if time.Since(began) >= d {
			return true
		}
	}
	return false
}

func newWorld(t *testing.T, h Harness, script string) *world {
	t.Helper()
	s, err := fakemodel.ParseScript([]byte(script))
	if err != nil {
		t.Fatal(err)
	}
	fm := fakemodel.New(s)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tr := &tracker{next: fm.Handler(), live: map[*http.Request]time.Time{}}
	srv := &http.Server{Handler: tr}
	served := make(chan struct{})
	go func() {
		defer close(served)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		fm.Close() // aborts handlers sleeping in a scripted delay
		srv.Close()
		<-served
	})
	return &world{t: t, h: h, fake: fm, track: tr, url: "http://" + ln.Addr().String(), cwd: t.TempDir(), home: t.TempDir()}
}

// opts are offline, isolated options: fakemodel endpoint, no API retries,
// a config home of the world's own, and a HOME that is not the user's.
func (w *world) opts(tier drover.Tier) drover.Options {
	zero := 0
	o := drover.Options{
		Binary:     w.h.Binary,
		Cwd:        w.cwd,
		Tier:       tier,
		Endpoint:   &drover.Endpoint{BaseURL: w.url, APIKey: "sk-conformance"},
		APIRetries: &zero,
		ConfigDir:  filepath.Join(w.home, "config"),
		Env:        map[string]string{"HOME": w.home, "XDG_CONFIG_HOME": filepath.Join(w.home, ".config"), "XDG_DATA_HOME": filepath.Join(w.home, ".local/share"), "XDG_CACHE_HOME": filepath.Join(w.home, ".cache"), "XDG_STATE_HOME": filepath.Join(w.home, ".local/state")},
		Timeout:    3 * time.Minute,
	}
	if w.h.Configure != nil {
		w.h.Configure(&o)
	}
	return o
}

// run runs one prompt through the engine and checks what every run must
// satisfy: valid events, init first, exactly one done and last, and no
// process left in the workspace.
func (w *world) run(ctx context.Context, prompt string, o drover.Options) []drover.Event {
	w.t.Helper()
	reg := drover.NewRegistry()
	if err := reg.Register(w.h.Adapter); err != nil {
		w.t.Fatal(err)
	}
	var h engine.Hooks
	if w.h.Live {
		h.Control = engine.NewControl()
	}
	events, err := engine.New(reg).Start(ctx, engine.Request{Agent: w.h.Adapter.ID(), Prompt: prompt, Options: o, Hooks: h})
	if err != nil {
		w.t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		if err := uestest.ValidateEvent(ev); err != nil {
			w.t.Errorf("invalid event: %v", err)
		}
		evs = append(evs, ev)
	}
	w.t.Logf("%s events: %v", w.h.Adapter.ID(), Types(evs))
	if _, err := uestest.OneDoneLast(evs); err != nil {
		w.t.Fatalf("%v: %v", err, Types(evs))
	}
	NoProcessIn(w.t, w.cwd)
	return evs
}

// Types lists the event types of evs.
func Types(evs []drover.Event) []drover.EventType { return uestest.Types(evs) }

// Payloads returns the payloads of type T in evs, in order.
func Payloads[T any](evs []drover.Event) []T {
	var out []T
	for _, ev := range evs {
		if p, ok := ev.Payload.(T); ok {
			out = append(out, p)
		}
	}
	return out
}

func done(evs []drover.Event) drover.DonePayload {
	d, _ := evs[len(evs)-1].Done()
	return d
}

// NoProcessIn fails if any process still has dir as its working directory:
// the vendor CLI and anything it spawned must be gone when a run ends.
func NoProcessIn(t *testing.T, dir string) {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd")); err == nil && cwd == dir {
			cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			t.Errorf("process %s (%q) still runs in %s after the run", e.Name(), strings.ReplaceAll(string(cmd), "\x00", " "), dir)
		}
	}
}

// firstInit asserts the stream starts with init, always (a RESUME_FAILED
// follows it).
func firstInit(t *testing.T, evs []drover.Event) drover.InitPayload {
	t.Helper()
	for _, ev := range evs {
		p, ok := ev.Payload.(drover.InitPayload)
		if !ok {
			t.Fatalf("first event is %s, want init", ev.Type)
		}
		return p
	}
	t.Fatal("no events")
	return drover.InitPayload{}
}

// Run runs every scenario of the suite against h, each as a subtest.
func Run(t *testing.T, h Harness) {
	t.Run("UES_TextAnswer", func(t *testing.T) { textAnswer(t, h) })
	t.Run("UES_ShellToolCall", func(t *testing.T) { shellToolCall(t, h) })
	t.Run("PERM1_WriteSupervised", func(t *testing.T) { writeSupervised(t, h) })
	t.Run("PERM3_WriteDryRunDenied", func(t *testing.T) { writeDryRun(t, h) })
	t.Run("ADP3_MaxTurns", func(t *testing.T) { maxTurns(t, h) })
	t.Run("UES6_RateLimitFailsFast", func(t *testing.T) { rateLimit(t, h) })
	t.Run("ADP5_ResumeContinues", func(t *testing.T) { resume(t, h) })
	t.Run("ADP5_ResumeUnknownFallsBack", func(t *testing.T) { resumeUnknown(t, h) })
	t.Run("ENG005_CancelMidAnswer", func(t *testing.T) { cancel(t, h) })
}

func textAnswer(t *testing.T, h Harness) {
	const answer = "Hello from the conformance suite."
	w := newWorld(t, h, `{"rules":[{"match":"greet","steps":[{"text":"`+answer+`"}]}]}`)
	evs := w.run(context.Background(), "please greet me", w.opts(drover.TierSupervised))
	if in := firstInit(t, evs); in.Cwd != w.cwd {
		t.Errorf("init cwd %q, want %q", in.Cwd, w.cwd)
	}
	d := done(evs)
	if d.Status != drover.StatusSuccess || d.ResumeToken == "" {
		t.Fatalf("done %+v", d)
	}
	if d.Usage.InputTokens == 0 || d.Usage.OutputTokens == 0 {
		t.Errorf("usage not reported: %+v", d.Usage)
	}
	texts := Payloads[drover.TextPayload](evs)
	if len(texts) == 0 || texts[len(texts)-1].Content != answer {
		t.Fatalf("texts %+v, want the last to be %q", texts, answer)
	}
}

func shellToolCall(t *testing.T, h Harness) {
	w := newWorld(t, h, `{"rules":[{"match":"shell","steps":[{"tools":[{"shell":"echo conformance-shell-ok"}]},{"text":"ran it"}]}]}`)
	evs := w.run(context.Background(), "use the shell", w.opts(drover.TierAutonomous))
	if d := done(evs); d.Status != drover.StatusSuccess || d.Usage.ToolUses < 1 {
		t.Fatalf("done %+v", d)
	}
	uses := Payloads[drover.ToolUsePayload](evs)
	res := Payloads[drover.ToolResultPayload](evs)
	if len(uses) != 1 || !strings.Contains(uses[0].Description, "echo conformance-shell-ok") {
		t.Fatalf("tool_use %+v", uses)
	}
	if len(res) != 1 || res[0].Status != drover.ToolSuccess || !strings.Contains(res[0].Output, "conformance-shell-ok") ||
		res[0].ToolUseID != uses[0].ToolUseID || res[0].ToolName != uses[0].ToolName {
		t.Fatalf("tool_result %+v for %+v", res, uses)
	}
	if !w.modelSaw("conformance-shell-ok") {
		t.Fatal("the model never received the shell output")
	}
}

// modelSaw reports whether a tool result containing s reached fakemodel.
func (w *world) modelSaw(s string) bool {
	for _, r := range w.fake.Requests() {
		for _, tr := range r.ToolResults {
			if strings.Contains(tr.Content, s) {
				return true
			}
		}
	}
	return false
}

const writeScript = `{"rules":[{"match":"write","steps":[{"tools":[{"write":"conformance.txt","content":"written by the agent\n"}]},{"text":"tried to write"}]}]}`

func writeSupervised(t *testing.T, h Harness) {
	w := newWorld(t, h, writeScript)
	evs := w.run(context.Background(), "write the file", w.opts(drover.TierSupervised))
	if d := done(evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	data, err := os.ReadFile(filepath.Join(w.cwd, "conformance.txt"))
	if err != nil || string(data) != "written by the agent\n" {
		t.Fatalf("file: %q, %v", data, err)
	}
	res := Payloads[drover.ToolResultPayload](evs)
	if len(res) == 0 || res[len(res)-1].Status != drover.ToolSuccess {
		t.Fatalf("tool_result %+v", res)
	}
}

// writeDryRun is PERM-3: the model asks to write in dry-run; no file is left
// behind and the stream shows the denial.
func writeDryRun(t *testing.T, h Harness) {
	w := newWorld(t, h, writeScript)
	evs := w.run(context.Background(), "write the file", w.opts(drover.TierDryRun))
	if _, err := os.Stat(filepath.Join(w.cwd, "conformance.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("dry-run left a file behind: %v", err)
	}
	res := Payloads[drover.ToolResultPayload](evs)
	if !slices.ContainsFunc(res, func(r drover.ToolResultPayload) bool { return r.Status == drover.ToolDenied }) {
		t.Fatalf("the stream does not show the denial: %+v", res)
	}
}

func maxTurns(t *testing.T, h Harness) {
	w := newWorld(t, h, `{"rules":[{"match":"loop","steps":[{"tools":[{"shell":"echo one"}]},{"tools":[{"shell":"echo two"}]},{"tools":[{"shell":"echo three"}]},{"text":"end"}]}]}`)
	o := w.opts(drover.TierAutonomous)
	o.MaxTurns = 1
	evs := w.run(context.Background(), "loop please", o)
	d := done(evs)
	if h.Adapter.Capabilities().MaxTurns {
		if d.Status != drover.StatusMaxTurns {
			t.Fatalf("done %+v, want max_turns", d)
		}
		return
	}
	// Not supported: refused before the CLI starts (ADP-3), never a
	// silently weaker run.
	errs := Payloads[drover.ErrorPayload](evs)
	if d.Status != drover.StatusError || len(errs) != 1 || errs[0].Code != drover.CodeUnsupportedOption {
		t.Fatalf("maxTurns unsupported but not refused: %v %+v", Types(evs), errs)
	}
	if n := len(w.fake.Requests()); n != 0 {
		t.Fatalf("the CLI ran (%d model requests) although the option was refused", n)
	}
}

func rateLimit(t *testing.T, h Harness) {
	w := newWorld(t, h, `{"rules":[{"match":"","steps":[{"error":{"status":429,"message":"conformance slow down"}}]}]}`)
	start := time.Now()
	evs := w.run(context.Background(), "anything at all", w.opts(drover.TierSupervised))
	if d := done(evs); d.Status != drover.StatusError {
		t.Fatalf("done %+v", d)
	}
	errs := Payloads[drover.ErrorPayload](evs)
	if !slices.ContainsFunc(errs, func(e drover.ErrorPayload) bool { return e.Code == drover.CodeRateLimited && !e.Recoverable }) {
		t.Fatalf("errors %+v, want RATE_LIMITED", errs)
	}
	// Fast means no hidden retries: one 429 was answered.
	n := 0
	for _, r := range w.fake.Requests() {
		if r.Status == 429 {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d requests answered 429, want 1 (retries not off?)", n)
	}
	t.Logf("429 run took %s", time.Since(start))
}

func resume(t *testing.T, h Harness) {
	w := newWorld(t, h, `{"rules":[
		{"match":"remember","steps":[{"text":"I will remember the word zebra."}]},
		{"match":"recall","steps":[{"text":"You asked me to remember a word."}]}]}`)
	first := done(w.run(context.Background(), "remember the word zebra", w.opts(drover.TierSupervised)))
	if first.Status != drover.StatusSuccess || first.ResumeToken == "" {
		t.Fatalf("first run %+v", first)
	}
	o := w.opts(drover.TierSupervised)
	o.Resume = first.ResumeToken
	evs := w.run(context.Background(), "recall what I said", o)
	if d := done(evs); d.Status != drover.StatusSuccess || d.ResumeToken == "" {
		t.Fatalf("resumed run %+v; errors %+v", d, Payloads[drover.ErrorPayload](evs))
	}
	if errs := Payloads[drover.ErrorPayload](evs); len(errs) != 0 {
		t.Fatalf("a valid resume produced errors: %+v", errs)
	}
	reqs := w.fake.Requests()
	var last fakemodel.Request
	for _, r := range reqs {
		if r.Rule != "" {
			last = r
		}
	}
	if !slices.ContainsFunc(last.UserTexts, func(s string) bool { return strings.Contains(s, "remember the word zebra") }) {
		t.Fatalf("the resumed request lacks the earlier history: %q", last.UserTexts)
	}
}

func resumeUnknown(t *testing.T, h Harness) {
	w := newWorld(t, h, `{"rules":[{"match":"","steps":[{"text":"a fresh start"}]}]}`)
	o := w.opts(drover.TierSupervised)
	o.Resume = h.UnknownResume
	evs := w.run(context.Background(), "continue please", o)
	d := done(evs)
	if d.Status != drover.StatusSuccess || d.ResumeToken == "" || d.ResumeToken == o.Resume {
		t.Fatalf("done %+v", d)
	}
	if evs[0].Type != drover.TypeInit {
		t.Fatalf("first event %s, want init (always first)", evs[0].Type)
	}
	p, ok := evs[1].Payload.(drover.ErrorPayload)
	if !ok || p.Code != drover.CodeResumeFailed || !p.Recoverable {
		t.Fatalf("second event %s %+v, want recoverable RESUME_FAILED", evs[1].Type, evs[1].Payload)
	}
	if texts := Payloads[drover.TextPayload](evs); len(texts) == 0 || texts[len(texts)-1].Content != "a fresh start" {
		t.Fatalf("texts %+v", texts)
	}
}

func cancel(t *testing.T, h Harness) {
	w := newWorld(t, h, `{"rules":[{"match":"","steps":[{"text":"this answer takes a long time","delayMs":120000}]}]}`)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	go func() {
		// Cancel once the scripted answer has been pending a while: the CLI
		// is waiting mid-answer.
		for ctx.Err() == nil {
			if w.track.pendingFor(500 * time.Millisecond) {
				stop()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	evs := w.run(ctx, "take your time", w.opts(drover.TierSupervised))
	if d := done(evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v", d)
	}
	if el := time.Since(start); el > 60*time.Second {
		t.Fatalf("the run took %s to end after cancellation", el)
	}
}
