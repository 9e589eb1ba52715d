package runs

import (
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
)

// Observer is told what the runs a supervisor executes do, for metrics
// (OBS-2; internal/metrics implements it): Config.Observer. A nil
// Observer costs the supervisor nothing; a set one is called a few times
// per run and once per event, so its methods must be cheap and must not
// block. It sees agents, outcomes, models and counts, never a run's id,
// prompt or content.
type Observer interface {
	// RunStarted is called when a run of agent (its canonical id) starts
	// executing here: it leaves pending, or is ended at once (cancelled
	// while pending). The RunObserver it returns, which must not be nil,
	// is told the rest of that run, and its Ended is always called.
	RunStarted(agent string) RunObserver
}

// RunObserver is told one run's progress. Recorded is called on the
// run's committer goroutine; the others on the run's own goroutine, and
// Ended last, after every other call has returned.
type RunObserver interface {
	// Recorded says an event of the run is durable in the ledger, wait
	// after it was handed to the ledger's writer. Called once per event,
	// in seq order; never for an event the ledger failed to record.
	Recorded(wait time.Duration)
	// Asked says the run asked a permission request that waits for an
	// answer (one no rule answered as it was asked).
	Asked()
	// Answered says the run recorded the answer to a permission request,
	// by whom it was given; waited says the request was one Asked reported.
	Answered(behavior drover.Behavior, by drover.AnswerSource, waited bool)
	// Ended says the run has ended, once the ledger has its end (or
	// failed to record it). A request Asked reported and never Answered
	// no longer waits.
	Ended(RunEnd)
}

// RunEnd is how a run ended, for an Observer.
type RunEnd struct {
	Outcome drover.Outcome
	// Model is the model its last init event named, else its options'; ""
	// when neither names one.
	Model string
	// Usage is its done event's usage; TotalCostUSD is the run's own
	// share (a continued conversation's earlier cost taken out), nil
	// when it reported none.
	Usage drover.Usage
}

// observe tells r's observer what ev says of the run's model and
// permission requests; called by record, on the run's goroutine.
func (r *recorder) observe(ev *drover.Event) {
	switch p := ev.Payload.(type) {
	case drover.InitPayload:
		if p.Model != "" {
			r.model = p.Model
		}
	case drover.PermissionRequestPayload:
		if p.AnsweredBy == "" {
			if r.waiting == nil {
				r.waiting = map[string]bool{}
			}
			r.waiting[p.RequestID] = true
			r.obs.Asked()
		}
	case drover.PermissionAnswerPayload:
		waited := r.waiting[p.RequestID]
		delete(r.waiting, p.RequestID)
		r.obs.Answered(p.Behavior, p.By, waited)
	}
}

// observeEnd tells r's observer how the run ended, as f records it.
func (r *recorder) observeEnd(f store.Finish) {
	model := r.model
	if model == "" {
		model = r.a.req.Options.Model
	}
	o := store.Run{Status: f.Status, Error: f.Error, DoneStatus: f.DoneStatus}.Outcome()
	r.obs.Ended(RunEnd{Outcome: o, Model: model, Usage: f.Usage})
}
