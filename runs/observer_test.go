package runs_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
)

// observer records what a supervisor tells it, one line per call.
type observer struct {
	mu   sync.Mutex
	runs map[string]*runLog // by agent: the tests run one run per agent
}

type runLog struct {
	o        *observer
	calls    []string
	recorded int
	waits    []time.Duration
	end      *runs.RunEnd
}

func (o *observer) RunStarted(agent string) runs.RunObserver {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.runs == nil {
		o.runs = map[string]*runLog{}
	}
	r := &runLog{o: o}
	o.runs[agent] = r
	return r
}

func (o *observer) log(agent string) (calls []string, recorded int, end *runs.RunEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	r := o.runs[agent]
	if r == nil {
		return nil, 0, nil
	}
	for _, w := range r.waits {
		if w < 0 {
			calls = append(calls, fmt.Sprintf("negative wait %v", w))
		}
	}
	return slices.Clone(r.calls), r.recorded, r.end
}

func (r *runLog) add(call string) {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	if r.end != nil {
		call += " (after Ended)"
	}
	r.calls = append(r.calls, call)
}

func (r *runLog) Recorded(wait time.Duration) {
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	r.recorded++
	r.waits = append(r.waits, wait)
}

func (r *runLog) Asked() { r.add("asked") }

func (r *runLog) Answered(b drover.Behavior, by drover.AnswerSource, waited bool) {
	r.add(fmt.Sprintf("answered %s by %s waited %v", b, by, waited))
}

func (r *runLog) Ended(e runs.RunEnd) {
	r.add("ended " + string(e.Outcome))
	r.o.mu.Lock()
	defer r.o.mu.Unlock()
	r.end = &e
}

// OBS-2: a supervisor's Observer is told each run's start, each event
// once it is durable, the permission requests that wait and every answer
// (saying which answered a waiting one), and, last, the run's end with
// its outcome, model and usage.
func TestOBS2_Observer(t *testing.T) {
	o := &observer{}
	// asker: answered by a client; denier: nobody may be asked, so its
	// request is denied as it is asked (by default) and never waits.
	denier := asker(true)
	denier.Name = "denier"
	f := newFixture(t, runs.Config{Observer: o}, quick(3), asker(true), denier)
	ctx := context.Background()

	q := f.start(t, runs.StartRequest{Agent: "quick", Prompt: "p", Options: drover.Options{Model: "m-opt"}})
	r := f.await(t, q)[0]
	calls, recorded, end := o.log("quick")
	if !slices.Equal(calls, []string{"ended completed"}) || recorded != int(r.LastSeq) || recorded != 4 {
		t.Fatalf("quick: calls %q, %d recorded of %d events", calls, recorded, r.LastSeq)
	}
	if end.Model != "m-opt" || end.Usage.InputTokens != 3 || end.Usage.OutputTokens != 2 {
		t.Fatalf("quick's end %+v: want the options' model and the done's usage", end)
	}

	a := f.start(t, runs.StartRequest{Agent: "asker", Prompt: "build", Options: drover.Options{ApprovalTimeout: time.Minute}})
	waitFor(t, "the request", func() bool {
		calls, _, _ := o.log("asker")
		return slices.Equal(calls, []string{"asked"})
	})
	if err := f.sup.Respond(ctx, a, "q1", drover.PermissionDecision{Behavior: drover.Allow}, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.sup.Steer(ctx, a, "stop", "test"); err != nil {
		t.Fatal(err)
	}
	r = f.await(t, a)[0]
	calls, recorded, _ = o.log("asker")
	if want := []string{"asked", "answered allow by client waited true", "ended completed"}; !slices.Equal(calls, want) || recorded != int(r.LastSeq) {
		t.Fatalf("asker: calls %q, want %q; %d recorded of %d events", calls, want, recorded, r.LastSeq)
	}

	d := f.start(t, runs.StartRequest{Agent: "denier", Prompt: "build"})
	waitFor(t, "the answer", func() bool {
		calls, _, _ := o.log("denier")
		return len(calls) == 1
	})
	if err := f.sup.Cancel(ctx, d); err != nil {
		t.Fatal(err)
	}
	r = f.await(t, d)[0]
	calls, recorded, _ = o.log("denier")
	if want := []string{"answered deny by default waited false", "ended cancelled"}; !slices.Equal(calls, want) || recorded != int(r.LastSeq) {
		t.Fatalf("denier: calls %q, want %q; %d recorded of %d events", calls, want, recorded, r.LastSeq)
	}
}
