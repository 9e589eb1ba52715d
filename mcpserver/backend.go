package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Backend is what the tools need of drover: starting, awaiting, reading
// and cancelling runs, and the agents it can run. Local is a supervisor of
// this process over its ledger; Remote is the drover that runs this
// process's agent, reached over its nested-run socket (a nested `drover
// mcp` inside a contained run, which cannot write the ledger).
type Backend interface {
	// Start starts a run and returns its id at once (runs.Supervisor.Start).
	Start(ctx context.Context, req runs.StartRequest) (runs.Started, error)
	// Cancel ends a run; an ended run is not an error.
	Cancel(ctx context.Context, id string) error
	// Await returns once every run of ids has ended and is recorded, or
	// with ctx's error when ctx ends first.
	Await(ctx context.Context, ids ...string) error
	// Run is run id as the ledger has it now; an unknown or unreachable
	// run is an error wrapping store.ErrNotFound.
	Run(ctx context.Context, id string) (*store.Run, error)
	// Events are run id's events after afterSeq, at most limit (0: all).
	Events(ctx context.Context, id string, afterSeq int64, limit int) ([]json.RawMessage, error)
	// Messages are run id's messages, oldest first.
	Messages(ctx context.Context, id string) ([]store.Message, error)
	// Tree is run id's children, the usage of its whole tree and its
	// permission requests waiting for an answer.
	Tree(ctx context.Context, id string) (*Tree, error)
	// Agents are the agents drover can run.
	Agents(ctx context.Context) ([]Agent, error)
}

// Tree is a run's children, the usage summed over it and its
// descendants, and its permission requests waiting for an answer.
type Tree struct {
	Children []store.Run
	Total    runs.TreeUsage
	Pending  []drover.PermissionRequestPayload
}

// Local returns the backend of a supervisor of this process.
func Local(sup *runs.Supervisor) Backend { return local{sup} }

type local struct{ sup *runs.Supervisor }

var _ Backend = local{}

func (l local) Start(ctx context.Context, req runs.StartRequest) (runs.Started, error) {
	return l.sup.Start(ctx, req)
}

func (l local) Cancel(ctx context.Context, id string) error { return l.sup.Cancel(ctx, id) }

func (l local) Await(ctx context.Context, ids ...string) error {
	_, err := l.sup.Await(ctx, ids...)
	return err
}

func (l local) Run(ctx context.Context, id string) (*store.Run, error) {
	return l.sup.Store().GetRun(ctx, id)
}

func (l local) Events(ctx context.Context, id string, afterSeq int64, limit int) ([]json.RawMessage, error) {
	evs, err := l.sup.Store().Events(ctx, id, afterSeq, limit)
	if err != nil {
		return nil, err
	}
	out := make([]json.RawMessage, len(evs))
	for i, ev := range evs {
		out[i] = ev.JSON
	}
	return out, nil
}

func (l local) Messages(ctx context.Context, id string) ([]store.Message, error) {
	return l.sup.Store().Messages(ctx, id)
}

func (l local) Tree(ctx context.Context, id string) (*Tree, error) {
	st := l.sup.Store()
	var t Tree
	var err error
	if t.Children, err = st.Children(ctx, id); err != nil {
		return nil, err
	}
	if t.Total, err = runs.SumTree(ctx, st, id); err != nil {
		return nil, err
	}
	if t.Pending, err = l.sup.Pending(ctx, id); err != nil {
		return nil, err
	}
	return &t, nil
}

func (l local) Agents(ctx context.Context) ([]Agent, error) {
	reg := l.sup.Registry()
	out := []Agent{}
	for _, id := range reg.List() {
		a, _ := reg.Get(id)
		av := a.Available(ctx)
		tiers := a.Capabilities().Tiers
		if tiers == nil {
			tiers = []drover.Tier{}
		}
		out = append(out, Agent{ID: id, Installed: av.Installed, Version: av.Version, Tested: av.Tested, Error: av.Error, Tiers: tiers})
	}
	return out, nil
}

// Remote returns the backend of a nested connection (protocol.DialNested):
// the drover that runs this process's agent starts and records the runs,
// and the connection is confined to that agent's run. The caller closes c
// once the server is done.
func Remote(c *protocol.Client) Backend { return remote{c} }

type remote struct{ c *protocol.Client }

var _ Backend = remote{}

// notFound makes the server's NOT_FOUND a store.ErrNotFound, as Backend
// says.
func notFound(err error) error {
	var pe *protocol.Error
	if errors.As(err, &pe) && pe.Code == protocol.CodeNotFound {
		return fmt.Errorf("%w: %s", store.ErrNotFound, pe.Message)
	}
	return err
}

func (r remote) Start(ctx context.Context, req runs.StartRequest) (runs.Started, error) {
	opts := req.Options
	res, err := r.c.Run(ctx, protocol.RunParams{Agent: req.Agent, Prompt: req.Prompt, Options: &opts, Parent: req.ParentID, Fork: req.ForkFrom})
	if err != nil {
		var pe *protocol.Error
		if !errors.As(err, &pe) {
			return runs.Started{}, err
		}
		// The server's refusal, said as the tools say their own errors; the
		// two Start errors the tools explain are known again by their text,
		// the only thing the protocol carries besides the code.
		for _, known := range []error{drover.ErrUnknownAgent, runs.ErrParentEnded} {
			if rest, ok := strings.CutPrefix(pe.Message, known.Error()); ok && pe.Code == protocol.CodeValidation {
				return runs.Started{}, fmt.Errorf("%w%s", known, rest)
			}
		}
		return runs.Started{}, errors.New(pe.Message)
	}
	return *res, nil
}

func (r remote) Cancel(ctx context.Context, id string) error { return notFound(r.c.Cancel(ctx, id)) }

func (r remote) Await(ctx context.Context, ids ...string) error {
	_, err := r.c.Await(ctx, ids...)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return notFound(err)
}

func (r remote) Run(ctx context.Context, id string) (*store.Run, error) {
	g, err := r.c.Get(ctx, protocol.GetParams{RunID: id})
	if err != nil {
		return nil, notFound(err)
	}
	return g.Run, nil
}

func (r remote) Events(ctx context.Context, id string, afterSeq int64, limit int) ([]json.RawMessage, error) {
	var out []json.RawMessage
	for {
		page, err := r.c.Events(ctx, protocol.EventsParams{RunID: id, AfterSeq: afterSeq, Limit: limit})
		if err != nil {
			return nil, notFound(err)
		}
		out = append(out, page.Events...)
		if !page.More || len(page.Events) == 0 || limit > 0 {
			return out, nil
		}
		var last struct {
			Seq int64 `json:"seq"`
		}
		if err := json.Unmarshal(page.Events[len(page.Events)-1], &last); err != nil || last.Seq <= afterSeq {
			return out, err
		}
		afterSeq = last.Seq
	}
}

func (r remote) Messages(ctx context.Context, id string) ([]store.Message, error) {
	g, err := r.c.Get(ctx, protocol.GetParams{RunID: id})
	if err != nil {
		return nil, notFound(err)
	}
	return g.Messages, nil
}

func (r remote) Tree(ctx context.Context, id string) (*Tree, error) {
	g, err := r.c.Get(ctx, protocol.GetParams{RunID: id})
	if err != nil {
		return nil, notFound(err)
	}
	t := &Tree{Children: g.Children, Pending: g.Pending}
	if g.Total != nil {
		t.Total = *g.Total
	} else {
		// The server sums a tree only when the run has children.
		t.Total = runs.TreeUsage{Usage: g.Run.Usage, Runs: 1}
		if g.Run.Usage.TotalCostUSD == nil {
			t.Total.WithoutCost = 1
		}
	}
	return t, nil
}

func (r remote) Agents(ctx context.Context) ([]Agent, error) {
	as, err := r.c.Agents(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Agent, len(as))
	for i, a := range as {
		out[i] = Agent{ID: a.ID, Installed: a.Installed, Version: a.Version, Tested: a.Tested, Error: a.Error, Tiers: a.Tiers}
	}
	return out, nil
}
