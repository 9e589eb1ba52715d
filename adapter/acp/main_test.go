package acp_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/adapter/acp/acptest"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// fakeBin is the scripted ACP agent (acptest), built once for the tests.
var fakeBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "drover-acp-test")
	if err != nil {
		panic(err)
	}
	if fakeBin, err = acptest.BuildIn(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) { os.RemoveAll(dir) }))
}

// fake is one run of the scripted agent.
type fake struct {
	mode  string             // acptest.ModeEnv
	agent func(*acp.Agent)   // adjusts the configured agent
	on    func(drover.Event) // sees each event as it comes
	ctx   context.Context
}

// run runs prompt on the scripted agent through the engine and checks what
// every run must satisfy: valid events, exactly one done and last, and no
// process of the run left. A run that does not end within a minute fails
// the test: it hung.
func (f fake) run(t *testing.T, prompt string, o drover.Options, hooks ...engine.Hooks) []drover.Event {
	t.Helper()
	a := acp.Agent{Name: "fake-acp", Command: fakeBin, Env: map[string]string{acptest.ModeEnv: f.mode}, Tiers: drover.Tiers()}
	if f.agent != nil {
		f.agent(&a)
	}
	reg := drover.NewRegistry()
	if err := reg.Register(acp.New(a)); err != nil {
		t.Fatal(err)
	}
	if o.Cwd == "" {
		o.Cwd = t.TempDir()
	}
	var h engine.Hooks
	if len(hooks) > 0 {
		h = hooks[0]
	}
	var groups []int
	h.Observer = func(_, pgid int) { groups = append(groups, pgid) }
	ctx := f.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	hung := time.AfterFunc(time.Minute, cancel)
	events, err := engine.New(reg).Start(ctx, engine.Request{Agent: a.Name, Prompt: prompt, Options: o, Hooks: h})
	if err != nil {
		t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		if err := uestest.ValidateEvent(ev); err != nil {
			t.Errorf("invalid event: %v", err)
		}
		evs = append(evs, ev)
		if f.on != nil {
			f.on(ev)
		}
	}
	if !hung.Stop() {
		t.Fatalf("the run did not end: %v", uestest.Types(evs))
	}
	if _, err := uestest.OneDoneLast(evs); err != nil {
		t.Fatalf("%v: %v", err, uestest.Types(evs))
	}
	for _, g := range groups {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group %d still exists after the run (%v)", g, err)
		}
	}
	t.Logf("events: %v", uestest.Types(evs))
	return evs
}

// payloads returns the payloads of type T in evs, in order.
func payloads[T any](evs []drover.Event) []T { return adaptertest.Payloads[T](evs) }

func doneOf(evs []drover.Event) (drover.DonePayload, map[string]any) {
	d, _ := evs[len(evs)-1].Done()
	return d, evs[len(evs)-1].Metadata
}

func texts(evs []drover.Event) []string {
	var out []string
	for _, p := range payloads[drover.TextPayload](evs) {
		out = append(out, p.Content)
	}
	return out
}

func hasType(evs []drover.Event, typ drover.EventType) bool {
	return slices.ContainsFunc(evs, func(ev drover.Event) bool { return ev.Type == typ })
}

// errorsOf returns the error payloads of evs.
func errorsOf(evs []drover.Event) []drover.ErrorPayload { return payloads[drover.ErrorPayload](evs) }
