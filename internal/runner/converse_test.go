//go:build unix

package runner

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
)

// convTranslator is the test Conversation for the fakes of converseFake:
// "ask" → permission_request, "said" → text, "ping" queues a pong,
// "turn" starts a new turn, "result" holds a done (with the process's exit
// in its metadata) and closes stdin. It refuses interrupts.
type convTranslator struct {
	Stamp
	prompt   string
	final    *drover.Event
	finished bool
	inTurn   bool
	outbox   []byte
	closeIn  bool
	rejected bool
	opened   bool
}

var (
	_ Opener    = (*convTranslator)(nil)
	_ Canceller = (*convTranslator)(nil)
)

func (c *convTranslator) Translate(line []byte) ([]drover.Event, error) {
	var m fakeMsg
	if err := c.Decode(line, &m, &m.Type); err != nil {
		return nil, err
	}
	switch m.Type {
	case "init":
		c.opened = true
		return []drover.Event{c.Init("m", "", nil, nil)}, nil
	case "ask":
		return []drover.Event{c.Event(drover.TypePermissionRequest, drover.PermissionRequestPayload{RequestID: m.ID,
			ToolName: "Bash", ToolUseID: "tu-" + m.ID, Input: map[string]any{"command": m.Text}})}, nil
	case "said":
		return []drover.Event{c.Event(drover.TypeText, drover.TextPayload{Content: m.Text})}, nil
	case "ping":
		c.outbox = append(c.outbox, line2(fakeInput{Kind: "pong"})...)
	case "turn":
		c.inTurn = true
	case "result":
		c.finished, c.inTurn, c.closeIn = true, false, true
		ev := c.Event(drover.TypeDone, drover.DonePayload{Status: drover.StatusSuccess, Result: m.Text, ResumeToken: "tok"})
		c.final = &ev
	case "rejected":
		c.rejected = true
	}
	return nil, nil
}

func (c *convTranslator) Finished() bool { return c.finished && !c.inTurn }

func (c *convTranslator) Finish(exit Exit) ([]drover.Event, bool) {
	if c.final == nil {
		return nil, c.rejected
	}
	ev := *c.final
	ev.Metadata = map[string]any{"exit": exit.String(), "stopped": exit.Stopped}
	return []drover.Event{ev}, false
}

func (c *convTranslator) Open() ([]byte, error) {
	return line2(fakeInput{Kind: "prompt", Text: c.prompt}), nil
}

func (c *convTranslator) Pass(in drover.LiveInput) ([]byte, error) {
	switch {
	case in.Answer != nil:
		return line2(fakeInput{Kind: "answer", ID: in.Answer.RequestID, Allow: in.Answer.Behavior == drover.Allow,
			Message: in.Answer.Message}), nil
	case in.Steer != nil:
		return line2(fakeInput{Kind: "steer", Text: in.Steer.Message}), nil
	}
	return nil, errors.New("refused")
}

// Opened implements Opener: the fake printed its init.
func (c *convTranslator) Opened() bool { return c.opened }

// Cancel implements Canceller.
func (c *convTranslator) Cancel() []byte { return line2(fakeInput{Kind: "cancel"}) }

func (c *convTranslator) Outbox() ([]byte, bool) {
	out := c.outbox
	c.outbox = nil
	return out, c.closeIn
}

func line2(v any) []byte {
	b, _ := json.Marshal(v)
	return append(b, '\n')
}

// convHooks run the fake conversational CLI in mode; launch, when set,
// adjusts each Launch.
type convHooks struct {
	Base
	mode   string
	launch func(*Launch)
}

func (h *convHooks) Capabilities() drover.Capabilities {
	return drover.Capabilities{Tiers: drover.Tiers(), Resume: true, Permissions: true, Steer: true, Interrupt: true}
}

func (h *convHooks) Prepare(req drover.Request) (*Launch, error) {
	var args []string
	if req.Options.Resume != "" {
		args = []string{"--resume", req.Options.Resume}
	}
	tr := &convTranslator{Stamp: h.Stamp(req), prompt: req.Prompt}
	open, _ := tr.Open()
	// GORACE: under -race, a process otherwise sleeps a second at exit.
	l := &Launch{Args: args, Env: append(os.Environ(), fakeAgentEnv+"="+h.mode, "GORACE=atexit_sleep_ms=0"),
		Stdin: string(open), Translator: tr}
	if h.launch != nil {
		h.launch(l)
	}
	return l, nil
}

// converse runs the fake in mode through the engine with opts (Binary set
// here), calling on for each event as it arrives, with the run's cancel;
// it returns the events and the pid of the last process started. A run
// that does not end within a minute fails the test: the loop hung.
func converse(t *testing.T, mode string, linger time.Duration, opts drover.Options, h engine.Hooks, on func(drover.Event, context.CancelFunc)) ([]drover.Event, int) {
	t.Helper()
	return converseWith(t, &convHooks{mode: mode}, linger, opts, h, on)
}

// converseWith is converse with hooks of the caller's.
func converseWith[H interface {
	Embedder
	drover.Adapter
}](t *testing.T, hooks H, linger time.Duration, opts drover.Options, h engine.Hooks, on func(drover.Event, context.CancelFunc)) ([]drover.Event, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	reg := drover.NewRegistry()
	if err := reg.Register(New(hooks, Spec{ID: "fake", Command: "fake", Linger: linger})); err != nil {
		t.Fatal(err)
	}
	opts.Binary = exe
	var pid int
	h.Observer = func(p, _ int) { pid = p }
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hung := time.AfterFunc(time.Minute, cancel)
	events, err := engine.New(reg).Start(ctx, engine.Request{Agent: "fake", Prompt: "hello", Options: opts, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		evs = append(evs, ev)
		if on != nil {
			on(ev, cancel)
		}
	}
	if !hung.Stop() {
		t.Fatalf("the run did not end: %v", types(evs))
	}
	return evs, pid
}

func types(evs []drover.Event) []drover.EventType {
	out := make([]drover.EventType, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func texts(evs []drover.Event) []string {
	var out []string
	for _, ev := range evs {
		if p, ok := ev.Payload.(drover.TextPayload); ok {
			out = append(out, p.Content)
		}
	}
	return out
}

// doneOf returns the run's done, which must be its last event.
func doneOf(t *testing.T, evs []drover.Event) (drover.DonePayload, map[string]any) {
	t.Helper()
	if len(evs) == 0 {
		t.Fatal("no events")
	}
	d, ok := evs[len(evs)-1].Done()
	if !ok {
		t.Fatalf("last event is not done: %v", types(evs))
	}
	return d, evs[len(evs)-1].Metadata
}

func answerWith(d drover.PermissionDecision) drover.PermissionFunc {
	return func(context.Context, drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		return d, nil
	}
}

// TestPERM2_ConversationPassesAnswers: a permission request the vendor
// asks becomes permission_request; the callback's answer reaches the
// vendor (which reports it), is recorded after the request, and the
// vendor's stdin is closed after its result, so it exits by itself.
func TestPERM2_ConversationPassesAnswers(t *testing.T) {
	for _, c := range []struct {
		d    drover.PermissionDecision
		want string
	}{
		{drover.PermissionDecision{Behavior: drover.Allow}, "allowed"},
		{drover.PermissionDecision{Behavior: drover.Deny, Message: "not now"}, "denied: not now"},
	} {
		t.Run(string(c.d.Behavior), func(t *testing.T) {
			evs, _ := converse(t, "ask", 0, drover.Options{}, engine.Hooks{CanUseTool: answerWith(c.d)}, nil)
			want := []drover.EventType{drover.TypeInit, drover.TypePermissionRequest, drover.TypePermissionAnswer, drover.TypeText, drover.TypeDone}
			if got := types(evs); !slices.Equal(got, want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			if got := texts(evs); !slices.Equal(got, []string{c.want}) {
				t.Fatalf("the vendor reported %q, want %q", got, c.want)
			}
			a := evs[2].Payload.(drover.PermissionAnswerPayload)
			if a.RequestID != "r1" || a.Behavior != c.d.Behavior || a.By != drover.ByCallback {
				t.Fatalf("answer %+v", a)
			}
			d, meta := doneOf(t, evs)
			if d.Status != drover.StatusSuccess || meta["exit"] != "exit status 0" || meta["stopped"] != false {
				t.Fatalf("done %+v %v: want success, the vendor exiting 0 at its stdin's end", d, meta)
			}
		})
	}
}

// TestCTL3_ConversationSteersAndWritesOutbox: what the translator queues
// after a line (a pong) reaches the vendor, and steering messages are
// passed on in order, each recorded as drover:steer before the vendor's
// reaction to it.
func TestCTL3_ConversationSteersAndWritesOutbox(t *testing.T) {
	ctl := engine.NewControl()
	evs, _ := converse(t, "chat", 0, drover.Options{}, engine.Hooks{Control: ctl}, func(ev drover.Event, _ context.CancelFunc) {
		switch p, _ := ev.Payload.(drover.TextPayload); p.Content {
		case "pong received":
			if err := ctl.Steer("left", "test"); err != nil {
				t.Error(err)
			}
		case "steer: left":
			if err := ctl.Steer("finish", "test"); err != nil {
				t.Error(err)
			}
		}
	})
	if got, want := texts(evs), []string{"pong received", "steer: left", "steer: finish"}; !slices.Equal(got, want) {
		t.Fatalf("texts %q, want %q", got, want)
	}
	var steered []string
	for i, ev := range evs {
		if p, ok := ev.Payload.(drover.SteerPayload); ok {
			steered = append(steered, p.Message)
			if next, _ := evs[i+1].Payload.(drover.TextPayload); next.Content != "steer: "+p.Message {
				t.Errorf("steer %q recorded, then %v", p.Message, evs[i+1])
			}
		}
	}
	if !slices.Equal(steered, []string{"left", "finish"}) {
		t.Fatalf("recorded steering %q", steered)
	}
	if d, meta := doneOf(t, evs); d.Result != "finished" || meta["exit"] != "exit status 0" {
		t.Fatalf("done %+v %v", d, meta)
	}
}

// TestCTL3_ConversationRefusedInput: an input the translator refuses is
// neither written (the vendor, which says back everything it reads, never
// saw it) nor recorded.
func TestCTL3_ConversationRefusedInput(t *testing.T) {
	ctl := engine.NewControl()
	evs, _ := converse(t, "chat", 0, drover.Options{}, engine.Hooks{Control: ctl}, func(ev drover.Event, _ context.CancelFunc) {
		if p, _ := ev.Payload.(drover.TextPayload); p.Content == "pong received" {
			if err := ctl.Interrupt("test"); err != nil {
				t.Error(err)
			}
			if err := ctl.Steer("finish", "test"); err != nil {
				t.Error(err)
			}
		}
	})
	if got, want := texts(evs), []string{"pong received", "steer: finish"}; !slices.Equal(got, want) {
		t.Fatalf("texts %q, want %q", got, want)
	}
	if slices.Contains(types(evs), drover.TypeInterrupt) {
		t.Fatalf("a refused interrupt was recorded: %v", types(evs))
	}
}

// TestPERM2_ConversationVendorExitsWhileAsked: a vendor that exits while
// its question is open ends the run with its exit status, even though the
// callback would never answer; the open request is recorded as denied at
// the run's end.
func TestPERM2_ConversationVendorExitsWhileAsked(t *testing.T) {
	wait := func(ctx context.Context, _ drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		<-ctx.Done()
		return drover.PermissionDecision{}, ctx.Err()
	}
	evs, _ := converse(t, "exit-asking", 0, drover.Options{ApprovalTimeout: time.Hour}, engine.Hooks{CanUseTool: wait}, nil)
	if d, _ := doneOf(t, evs); d.Status != drover.StatusError {
		t.Fatalf("done %+v: %v", d, types(evs))
	}
	var code drover.ErrorCode
	var answer *drover.PermissionAnswerPayload
	for _, ev := range evs {
		switch p := ev.Payload.(type) {
		case drover.ErrorPayload:
			code = p.Code
		case drover.PermissionAnswerPayload:
			answer = &p
		}
	}
	if code != drover.CodeProcessExit {
		t.Fatalf("error code %q, want PROCESS_EXIT: %v", code, types(evs))
	}
	if answer == nil || answer.By != drover.ByRunEnd || answer.Behavior != drover.Deny {
		t.Fatalf("open request answered %+v, want denied at the run's end", answer)
	}
}

// TestCTL3_ConversationCancelWhileAsked: cancelling a run whose vendor
// waits for an answer (and reads nothing) ends it interrupted, with the
// vendor's process gone.
func TestCTL3_ConversationCancelWhileAsked(t *testing.T) {
	wait := func(ctx context.Context, _ drover.PermissionRequestPayload) (drover.PermissionDecision, error) {
		<-ctx.Done()
		return drover.PermissionDecision{}, ctx.Err()
	}
	evs, pid := converse(t, "silent-ask", 0, drover.Options{}, engine.Hooks{CanUseTool: wait}, func(ev drover.Event, cancel context.CancelFunc) {
		if ev.Type == drover.TypePermissionRequest {
			cancel()
		}
	})
	if d, _ := doneOf(t, evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v: %v", d, types(evs))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the vendor process %d is still there: %v", pid, err)
	}
}

// TestADP6_ConversationLinger: a vendor that stays after its result
// although its stdin was closed is stopped after the linger period, and
// the run keeps its result.
func TestADP6_ConversationLinger(t *testing.T) {
	evs, _ := converse(t, "linger", 200*time.Millisecond, drover.Options{}, engine.Hooks{Control: engine.NewControl()}, nil)
	if d, meta := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "done" || meta["stopped"] != true {
		t.Fatalf("done %+v %v: want the result, the process stopped", d, meta)
	}
}

// TestADP6_ConversationNewTurnIsNotLingering: after a result, a new turn
// (a queued message) keeps the vendor at work: its silence then is not
// lingering, and the run ends with the last turn's result.
func TestADP6_ConversationNewTurnIsNotLingering(t *testing.T) {
	evs, _ := converse(t, "turns", 500*time.Millisecond, drover.Options{}, engine.Hooks{Control: engine.NewControl()}, nil)
	if d, meta := doneOf(t, evs); d.Result != "second" || meta["stopped"] != false {
		t.Fatalf("done %+v %v: want the second turn's result, the process not stopped", d, meta)
	}
}

// TestADP5_ConversationResumeFallback: a vendor that rejects the resume
// token in a conversation gets a fresh conversation: init first (always a
// run's first event), then a recoverable RESUME_FAILED.
func TestADP5_ConversationResumeFallback(t *testing.T) {
	evs, _ := converse(t, "reject", 0, drover.Options{Resume: "old"}, engine.Hooks{Control: engine.NewControl()}, nil)
	if len(evs) < 2 || evs[0].Type != drover.TypeInit {
		t.Fatalf("events %v: want init first", types(evs))
	}
	if p, ok := evs[1].Payload.(drover.ErrorPayload); !ok || p.Code != drover.CodeResumeFailed || !p.Recoverable {
		t.Fatalf("second event %+v, want a recoverable RESUME_FAILED", evs[1])
	}
	if d, _ := doneOf(t, evs); d.Result != "fresh" {
		t.Fatalf("done %+v", d)
	}
}

// TestADP1_ConversationLineTooLong: a line past proc's cap is a
// recoverable LINE_TOO_LONG and the conversation goes on.
func TestADP1_ConversationLineTooLong(t *testing.T) {
	evs, _ := converse(t, "toolong", 0, drover.Options{}, engine.Hooks{Control: engine.NewControl()}, nil)
	want := []drover.EventType{drover.TypeInit, drover.TypeError, drover.TypeDone}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if p := evs[1].Payload.(drover.ErrorPayload); p.Code != drover.CodeLineTooLong || !p.Recoverable {
		t.Fatalf("error %+v", p)
	}
	if d, _ := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
}

// TestConversationWithoutLiveIsOneShot: with nobody to answer or steer (no
// Live), a Conversation's vendor gets Launch.Stdin, closed after it: the
// fake reads its prompt, answers and exits at EOF.
func TestConversationWithoutLiveIsOneShot(t *testing.T) {
	evs, _ := converse(t, "reject", 0, drover.Options{}, engine.Hooks{}, nil)
	if d, meta := doneOf(t, evs); d.Result != "fresh" || meta["exit"] != "exit status 0" {
		t.Fatalf("done %+v %v", d, meta)
	}
}

// TestConversationConverseWithoutLive: with Launch.Converse, a vendor
// that speaks only its conversation is conversed with although nobody can
// answer or steer (no Live): the fake's ping gets the translator's pong,
// which a one-shot run (its stdin closed after the prompt) never gives.
func TestConversationConverseWithoutLive(t *testing.T) {
	hooks := &convHooks{mode: "chat", launch: func(l *Launch) { l.Converse, l.Stdin = true, "" }}
	// chat ends only after a "finish" steering message, which nobody can
	// send here: the run is cancelled once the pong has been received.
	evs, _ := converseWith(t, hooks, 0, drover.Options{}, engine.Hooks{}, func(ev drover.Event, cancel context.CancelFunc) {
		if p, _ := ev.Payload.(drover.TextPayload); p.Content == "pong received" {
			cancel()
		}
	})
	if got := texts(evs); !slices.Equal(got, []string{"pong received"}) {
		t.Fatalf("texts %q: want the pong the conversation answered", got)
	}
}

// TestADP6_ConversationOpenTimeout: an Opener whose vendor never answers
// its opening is stopped at Launch.OpenTimeout, and the run ends instead
// of hanging.
func TestADP6_ConversationOpenTimeout(t *testing.T) {
	hooks := &convHooks{mode: "mute", launch: func(l *Launch) { l.OpenTimeout = 300 * time.Millisecond }}
	evs, pid := converseWith(t, hooks, 0, drover.Options{}, engine.Hooks{Control: engine.NewControl()}, nil)
	if d, _ := doneOf(t, evs); d.Status != drover.StatusError {
		t.Fatalf("done %+v: %v", d, types(evs))
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the vendor process %d is still there: %v", pid, err)
	}
}

// TestENG005_ConversationCancelAsksFirst: cancelling the run of a
// Canceller writes its cancel request before the process is stopped: the
// fake got it (and wrote its file), and the run ends interrupted.
func TestENG005_ConversationCancelAsksFirst(t *testing.T) {
	// The file is in the workspace: a run of the default tier is
	// contained, and may write only there.
	ws := t.TempDir()
	mark := ws + "/cancelled"
	hooks := &convHooks{mode: "cancellable", launch: func(l *Launch) { l.Env = append(l.Env, fakeArgEnv+"="+mark) }}
	evs, pid := converseWith(t, hooks, 0, drover.Options{Cwd: ws}, engine.Hooks{Control: engine.NewControl()}, func(ev drover.Event, cancel context.CancelFunc) {
		if ev.Type == drover.TypeInit {
			cancel()
		}
	})
	if d, _ := doneOf(t, evs); d.Status != drover.StatusInterrupted {
		t.Fatalf("done %+v: %v", d, types(evs))
	}
	if data, err := os.ReadFile(mark); string(data) != "cancelled" {
		t.Fatalf("the vendor never got the cancel request: %q, %v", data, err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("the vendor process %d is still there: %v", pid, err)
	}
}

// TestInputQueue: writes are read in order across reads of any size;
// after Close what was queued is still read, then EOF; later writes are
// dropped.
func TestInputQueue(t *testing.T) {
	q := newInputQueue()
	q.Write([]byte("hello "))
	q.Write(nil)
	q.Write([]byte("world"))
	got := make(chan string)
	go func() {
		b, _ := io.ReadAll(io.LimitReader(q, 11))
		got <- string(b)
	}()
	if s := <-got; s != "hello world" {
		t.Fatalf("read %q", s)
	}
	q.Write([]byte("!"))
	q.Close()
	q.Close()
	q.Write([]byte("dropped"))
	if b, err := io.ReadAll(q); string(b) != "!" || err != nil {
		t.Fatalf("after close: %q, %v", b, err)
	}
}

// warmTranslator is a convTranslator that names a type to warm, counts
// how often the runner asks for its types and decodes that type, and
// notes whether the first line came after a decode.
type warmTranslator struct {
	*convTranslator
	asked, decoded, lines int
	warmFirst             bool
}

// warmProbe is the type a warmTranslator names: it counts its decodes.
type warmProbe struct{ decoded *int }

func (p *warmProbe) UnmarshalJSON([]byte) error {
	*p.decoded++
	return nil
}

func (w *warmTranslator) Decodes() []any {
	w.asked++
	return []any{&warmProbe{decoded: &w.decoded}}
}

func (w *warmTranslator) Translate(line []byte) ([]drover.Event, error) {
	if w.lines == 0 {
		w.warmFirst = w.decoded > 0
	}
	w.lines++
	return w.convTranslator.Translate(line)
}

// TestPERF1_TranslatorWarmedBeforeFirstLine: the types a Translator that
// is a Warmer names are decoded once per process started, before it
// translates the vendor's first line, in a one-shot run and in a
// conversation alike.
func TestPERF1_TranslatorWarmedBeforeFirstLine(t *testing.T) {
	for _, c := range []struct {
		name   string
		mode   string
		launch func(*Launch)
		cancel string // a text after which the run is cancelled
	}{
		{name: "one-shot", mode: "reject"},
		{name: "conversation", mode: "chat", launch: func(l *Launch) { l.Converse, l.Stdin = true, "" }, cancel: "pong received"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w *warmTranslator
			hooks := &convHooks{mode: c.mode, launch: func(l *Launch) {
				if c.launch != nil {
					c.launch(l)
				}
				w = &warmTranslator{convTranslator: l.Translator.(*convTranslator)}
				l.Translator = w
			}}
			converseWith(t, hooks, 0, drover.Options{}, engine.Hooks{}, func(ev drover.Event, cancel context.CancelFunc) {
				if p, _ := ev.Payload.(drover.TextPayload); c.cancel != "" && p.Content == c.cancel {
					cancel()
				}
			})
			if w == nil || w.lines == 0 || !w.warmFirst || w.asked != 1 || w.decoded != 1 {
				t.Fatalf("translator %+v: want its type decoded once, before its first line", w)
			}
		})
	}
}
