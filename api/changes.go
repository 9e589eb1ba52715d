package api

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// The operations on runs' changes (WS-2…WS-4, docs/workspaces.md).

// DecideParams name a run whose change is decided, and who decides.
type DecideParams struct {
	RunID string `json:"runId" jsonschema:"the run's id"`
	By    string `json:"by,omitempty" jsonschema:"who decides, recorded with the decision"`
}

// MergeParams are a merge of a run's branch into the user's current
// branch: squashed into one commit unless NoSquash.
type MergeParams struct {
	RunID    string `json:"runId" jsonschema:"the run's id"`
	NoSquash bool   `json:"noSquash,omitempty" jsonschema:"make a merge commit rather than one squashed commit"`
	By       string `json:"by,omitempty" jsonschema:"who decides, recorded with the decision"`
}

// ReviseParams send a run's change back for another pass: a new run of the
// same agent, in the same session and workspace, with Prompt. Options,
// when given, replace the run's own (its working directory stays the
// workspace's).
type ReviseParams struct {
	RunID   string          `json:"runId" jsonschema:"the run whose change is sent back"`
	Prompt  string          `json:"prompt" jsonschema:"what to change"`
	Options *drover.Options `json:"options,omitempty" jsonschema:"the new run's options; default the run's own"`
	By      string          `json:"by,omitempty" jsonschema:"who asks, recorded with the decision"`
}

// CompareParams name the runs "compare" sets side by side.
type CompareParams struct {
	Runs []string `json:"runs" jsonschema:"the runs' ids"`
}

// CompareResult is a row per run, in the order asked.
type CompareResult struct {
	Rows []CompareRow `json:"rows"`
}

// CompareRow is one run of a comparison: its record and its change, if
// it worked in a git repository (without the patch).
type CompareRow struct {
	Run    store.Run     `json:"run"`
	Change *store.Change `json:"change,omitempty"`
}

// CollectParams bound "gc": only changes decided longer ago than
// OlderThan (a duration string, "7d" for days too; default 7 days).
type CollectParams struct {
	OlderThan string `json:"olderThan,omitempty" jsonschema:"only changes decided longer ago than this (e.g. 7d, 12h); default 7d"`
}

// CollectResult names the runs whose workspaces and branches were removed.
type CollectResult struct {
	Runs []string `json:"runs"`
}

// ParseAge reads an age as Go's durations ("12h", "90m") or whole days
// ("7d").
func ParseAge(s string) (time.Duration, error) {
	if n, err := time.ParseDuration(s); err == nil {
		return n, nil
	}
	if d, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.Atoi(d); err == nil && days >= 0 {
			return time.Duration(days) * 24 * time.Hour, nil
		}
	}
	return 0, Errorf(CodeValidation, "%q is not an age (e.g. 7d, 12h, 30m)", s)
}

// Change implements Service.
func (l *Local) Change(ctx context.Context, p RunIDParams) (*store.Change, error) {
	c, err := l.sup.Change(ctx, p.RunID)
	if err != nil {
		return nil, changeError(ctx, l, p.RunID, err)
	}
	return c, nil
}

// changeError is NOT_FOUND for a run that has no change, saying whether
// the run exists.
func changeError(ctx context.Context, l *Local, id string, err error) error {
	if e := ErrorOf(err); e.Code == CodeNotFound {
		if _, rerr := l.st.GetRun(ctx, id); rerr != nil {
			return Errorf(CodeNotFound, "no run %s in the ledger", id)
		}
		return Errorf(CodeNotFound, "run %s worked in no git repository: it has no change", id)
	}
	return ErrorOf(err)
}

// Apply implements Service.
func (l *Local) Apply(ctx context.Context, p DecideParams) (*store.Change, error) {
	c, err := l.sup.Apply(ctx, p.RunID, by(ctx, p.By))
	return c, decideError(err)
}

// Merge implements Service.
func (l *Local) Merge(ctx context.Context, p MergeParams) (*store.Change, error) {
	c, err := l.sup.Merge(ctx, p.RunID, by(ctx, p.By), !p.NoSquash)
	return c, decideError(err)
}

// Discard implements Service.
func (l *Local) Discard(ctx context.Context, p DecideParams) (*store.Change, error) {
	c, err := l.sup.Discard(ctx, p.RunID, by(ctx, p.By))
	return c, decideError(err)
}

// decideError classifies a decision's error (nil stays nil).
func decideError(err error) error {
	if err == nil {
		return nil
	}
	return ErrorOf(err)
}

// Revise implements Service: the run's agent and options (its recorded
// ones without what the ledger redacted, or p.Options), in its session
// and workspace.
func (l *Local) Revise(ctx context.Context, p ReviseParams) (*runs.Started, error) {
	if p.Prompt == "" {
		return nil, Errorf(CodeValidation, "revise: say what to change (the prompt is empty)")
	}
	r, err := l.st.GetRun(ctx, p.RunID)
	if err != nil {
		return nil, changeError(ctx, l, p.RunID, err)
	}
	var opts drover.Options
	if p.Options != nil {
		opts = *p.Options
	} else if err := json.Unmarshal(r.Options, &opts); err != nil {
		return nil, Errorf(CodeInternal, "run %s's options: %v", r.ID, err)
	} else {
		opts = runs.Unredact(opts)
	}
	opts.SessionID, opts.Resume, opts.Fork = r.SessionID, "", false
	if opts.Worktree == nil {
		opts.Worktree = &drover.Worktree{}
	}
	req, err := l.request(RunParams{Agent: r.Agent, Prompt: p.Prompt, Options: &opts})
	if err != nil {
		return nil, err
	}
	req.Revise = &runs.Revision{RunID: r.ID, By: by(ctx, p.By)}
	started, err := l.sup.Start(ctx, req)
	if err != nil {
		return nil, startError(err)
	}
	return &started, nil
}

// Compare implements Service.
func (l *Local) Compare(ctx context.Context, p CompareParams) (*CompareResult, error) {
	if len(p.Runs) == 0 {
		return nil, Errorf(CodeValidation, "compare: name the runs to compare")
	}
	res := &CompareResult{Rows: []CompareRow{}}
	for _, id := range p.Runs {
		r, err := l.st.GetRun(ctx, id)
		if err != nil {
			return nil, changeError(ctx, l, id, err)
		}
		row := CompareRow{Run: *r}
		if c, err := l.sup.Change(ctx, id); err == nil {
			c.Patch = ""
			row.Change = c
		} else if CodeOf(err) != CodeNotFound {
			return nil, ErrorOf(err)
		}
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// Collect implements Service.
func (l *Local) Collect(ctx context.Context, p CollectParams) (*CollectResult, error) {
	age := 7 * 24 * time.Hour
	if p.OlderThan != "" {
		var err error
		if age, err = ParseAge(p.OlderThan); err != nil {
			return nil, err
		}
	}
	ids, err := l.sup.Collect(ctx, age)
	if err != nil {
		return nil, ErrorOf(err)
	}
	if ids == nil {
		ids = []string{}
	}
	slices.Sort(ids)
	return &CollectResult{Runs: ids}, nil
}

// Change implements Service.
func (r Remote) Change(ctx context.Context, p RunIDParams) (*store.Change, error) {
	return call[*store.Change](ctx, r, "change", p)
}

// Apply implements Service.
func (r Remote) Apply(ctx context.Context, p DecideParams) (*store.Change, error) {
	return call[*store.Change](ctx, r, "apply", p)
}

// Merge implements Service.
func (r Remote) Merge(ctx context.Context, p MergeParams) (*store.Change, error) {
	return call[*store.Change](ctx, r, "merge", p)
}

// Discard implements Service.
func (r Remote) Discard(ctx context.Context, p DecideParams) (*store.Change, error) {
	return call[*store.Change](ctx, r, "discard", p)
}

// Revise implements Service.
func (r Remote) Revise(ctx context.Context, p ReviseParams) (*runs.Started, error) {
	return call[*runs.Started](ctx, r, "revise", p)
}

// Compare implements Service.
func (r Remote) Compare(ctx context.Context, p CompareParams) (*CompareResult, error) {
	return call[*CompareResult](ctx, r, "compare", p)
}

// Collect implements Service.
func (r Remote) Collect(ctx context.Context, p CollectParams) (*CollectResult, error) {
	return call[*CollectResult](ctx, r, "gc", p)
}

// Change implements Service: the root's subtree only.
func (c *Confined) Change(ctx context.Context, p RunIDParams) (*store.Change, error) {
	if err := c.within(ctx, false, p.RunID); err != nil {
		return nil, err
	}
	return c.svc.Change(ctx, p)
}

// Compare implements Service: the root's subtree only.
func (c *Confined) Compare(ctx context.Context, p CompareParams) (*CompareResult, error) {
	if err := c.within(ctx, false, p.Runs...); err != nil {
		return nil, err
	}
	return c.svc.Compare(ctx, p)
}

// decision checks that c may decide about run id's change: never from
// inside a run (accepting or sending back an agent's work is not for
// another agent of the same tree to do), and from a client at the top
// (drover mcp run by a person, an orchestrator) only about the runs it
// started and their descendants.
func (c *Confined) decision(ctx context.Context, id string) error {
	if c.root != "" {
		return Errorf(CodeBoundaryViolation, "a client inside run %s cannot decide about a run's change: apply, merge, discard and revise are its person's (drover apply, the dashboard)", c.root)
	}
	return c.within(ctx, true, id)
}

// Apply implements Service: see decision.
func (c *Confined) Apply(ctx context.Context, p DecideParams) (*store.Change, error) {
	if err := c.decision(ctx, p.RunID); err != nil {
		return nil, err
	}
	return c.svc.Apply(ctx, p)
}

// Merge implements Service: see decision.
func (c *Confined) Merge(ctx context.Context, p MergeParams) (*store.Change, error) {
	if err := c.decision(ctx, p.RunID); err != nil {
		return nil, err
	}
	return c.svc.Merge(ctx, p)
}

// Discard implements Service: see decision.
func (c *Confined) Discard(ctx context.Context, p DecideParams) (*store.Change, error) {
	if err := c.decision(ctx, p.RunID); err != nil {
		return nil, err
	}
	return c.svc.Discard(ctx, p)
}

// Revise implements Service: see decision; the new run is bounded as any
// run started through c (the options of the run revised, or p.Options
// checked as a child's would be).
func (c *Confined) Revise(ctx context.Context, p ReviseParams) (*runs.Started, error) {
	if err := c.decision(ctx, p.RunID); err != nil {
		return nil, err
	}
	if p.Options != nil {
		if err := childOptions(*p.Options); err != nil {
			return nil, err
		}
	}
	started, err := c.svc.Revise(ctx, p)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.started = append(c.started, started.RunID)
	c.mu.Unlock()
	return started, nil
}

// Collect implements Service: refused; it is the operator's.
func (c *Confined) Collect(context.Context, CollectParams) (*CollectResult, error) {
	return nil, Errorf(CodeBoundaryViolation, "drover gc is its operator's")
}
