package runs

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-run/drover/internal/gitws"
	"github.com/drover-run/drover/store"
)

// The decisions about a run's change (WS-3): apply, merge, discard, and
// housekeeping. Each reads the change as the ledger has it (reading an
// open one of an ended run first, Change), does its git work on the
// user's repository, and records the decision: who, when, which.
// Refusals say why in one line and change nothing: a run still working
// or already decided is store.ErrConflict, a run that worked in place or
// changed nothing a VALIDATION_ERROR, a change that does not apply a
// *ConflictError.

// ConflictError is a change that does not apply to the user's tree or
// branch: the files it conflicts on. Nothing was changed.
type ConflictError struct {
	RunID string
	Into  string // the repository
	Files []string
	// Detail is git's own account.
	Detail string
}

// Error names the run, the files, and that nothing changed.
func (e *ConflictError) Error() string {
	files := "its files"
	if len(e.Files) > 0 {
		files = strings.Join(e.Files, ", ")
	}
	return fmt.Sprintf("run %s's change conflicts with %s in %s: nothing was changed", e.RunID, files, e.Into)
}

// Unwrap makes a ConflictError a store.ErrConflict (CONFLICT in every
// face).
func (e *ConflictError) Unwrap() error { return store.ErrConflict }

// decidable returns run id's change when it can be applied, merged or
// discarded: the run has ended with a change in a workspace of its own
// that nobody decided yet.
func (s *Supervisor) decidable(ctx context.Context, id, verb string) (*store.Change, *gitws.Repo, error) {
	c, err := s.Change(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		if _, rerr := s.st.GetRun(ctx, id); rerr != nil {
			return nil, nil, rerr
		}
		return nil, nil, invalid("%s: run %s worked in no git repository: it has no change", verb, id)
	}
	if err != nil {
		return nil, nil, err
	}
	switch {
	case c.State == store.ChangeOpen:
		return nil, nil, fmt.Errorf("%s: run %s is still working: %w", verb, id, store.ErrConflict)
	case c.Branch == "":
		return nil, nil, invalid("%s: run %s worked in place: its change is in %s already", verb, id, c.Repo)
	case c.State == store.ChangeRevised:
		next := ""
		if n := len(c.Decisions); n > 0 {
			next = c.Decisions[n-1].Detail
		}
		return nil, nil, fmt.Errorf("%s: run %s's change was revised by run %s, whose change includes it: %w", verb, id, next, store.ErrConflict)
	case c.State != store.ChangePending && !(c.State == store.ChangeNone && verb == "discard"):
		if c.State == store.ChangeNone {
			return nil, nil, invalid("%s: run %s changed nothing", verb, id)
		}
		return nil, nil, fmt.Errorf("%s: run %s's change was %s already%s: %w", verb, id, c.State, decided(c), store.ErrConflict)
	}
	repo, err := gitws.Open(ctx, c.Repo)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", verb, err)
	}
	return c, repo, nil
}

// decided says who took a change's last decision, and when.
func decided(c *store.Change) string {
	if len(c.Decisions) == 0 {
		return ""
	}
	d := c.Decisions[len(c.Decisions)-1]
	return fmt.Sprintf(" (by %s at %s)", d.By, d.At.Local().Format(time.DateTime))
}

// decide records d on run id's change, which must still be pending (or
// none, for a discard), and returns the change as recorded.
func (s *Supervisor) decide(ctx context.Context, id string, d store.ChangeDecision) (*store.Change, error) {
	if err := s.st.DecideChange(ctx, id, d, store.ChangePending, store.ChangeNone); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("run %s's change was decided meanwhile: %w", id, err)
		}
		return nil, err
	}
	return s.st.GetChange(ctx, id)
}

// patch is c's whole patch: the ledger's, or the run's branch's when it
// was over the ledger's limit.
func patch(ctx context.Context, repo *gitws.Repo, c *store.Change) (string, error) {
	if !c.Truncated {
		return c.Patch, nil
	}
	cs, err := repo.Diff(ctx, c.Base, c.Commit, 1<<62)
	if err != nil {
		return "", fmt.Errorf("the change's patch, from branch %s: %w", c.Branch, err)
	}
	return cs.Patch, nil
}

// Apply applies run id's change to the user's working tree, whole or not
// at all (WS-3): a *ConflictError naming each file that does not apply,
// and nothing changed; applied once, the change is decided applied, and a
// second apply says so.
func (s *Supervisor) Apply(ctx context.Context, id, by string) (*store.Change, error) {
	c, repo, err := s.decidable(ctx, id, "apply")
	if err != nil {
		return nil, err
	}
	p, err := patch(ctx, repo, c)
	if err != nil {
		return nil, err
	}
	var ce *gitws.ConflictError
	switch err := repo.Apply(ctx, p); {
	case errors.Is(err, gitws.ErrApplied):
		return nil, fmt.Errorf("apply: %s holds run %s's change already: %w", c.Repo, id, store.ErrConflict)
	case errors.As(err, &ce):
		return nil, &ConflictError{RunID: id, Into: c.Repo, Files: ce.Files, Detail: ce.Detail}
	case err != nil:
		return nil, fmt.Errorf("apply: %w", err)
	}
	return s.decide(ctx, id, store.ChangeDecision{Action: store.ChangeApplied, By: by, Detail: c.Repo})
}

// Merge merges run id's branch into the user's current branch (WS-3), as
// one commit on it (squash) or as a merge commit: conflicts between the
// branches or with local changes are a *ConflictError, and nothing is
// changed. The decision's detail is the commit made.
func (s *Supervisor) Merge(ctx context.Context, id, by string, squash bool) (*store.Change, error) {
	c, repo, err := s.decidable(ctx, id, "merge")
	if err != nil {
		return nil, err
	}
	r, err := s.st.GetRun(ctx, id)
	if err != nil {
		return nil, err
	}
	var ce *gitws.ConflictError
	commit, err := repo.Merge(ctx, c.Branch, squash, commitMessage(r.Prompt, id, r.Agent), author(r.Agent))
	switch {
	case errors.Is(err, gitws.ErrApplied):
		return nil, fmt.Errorf("merge: the current branch of %s holds run %s's change already: %w", c.Repo, id, store.ErrConflict)
	case errors.As(err, &ce):
		return nil, &ConflictError{RunID: id, Into: c.Repo, Files: ce.Files, Detail: ce.Detail}
	case err != nil:
		return nil, fmt.Errorf("merge: %w", err)
	}
	return s.decide(ctx, id, store.ChangeDecision{Action: store.ChangeMerged, By: by, Detail: commit})
}

// Discard removes run id's workspace and branch and decides its change
// discarded (WS-3).
func (s *Supervisor) Discard(ctx context.Context, id, by string) (*store.Change, error) {
	c, repo, err := s.decidable(ctx, id, "discard")
	if err != nil {
		return nil, err
	}
	// Decided first: a change applied meanwhile keeps its workspace.
	if _, err := s.decide(ctx, id, store.ChangeDecision{Action: store.ChangeDiscarded, By: by}); err != nil {
		return nil, err
	}
	if err := s.removeWorkspace(ctx, repo, c); err != nil {
		return nil, fmt.Errorf("discard: the change is discarded, but its workspace stays (drover gc removes it): %w", err)
	}
	return s.st.GetChange(ctx, id)
}

// removeWorkspace removes c's workspace directory and its branch, and
// records that the workspace is gone.
func (s *Supervisor) removeWorkspace(ctx context.Context, repo *gitws.Repo, c *store.Change) error {
	if c.Workspace != "" {
		if err := gitws.RemoveWorkspace(filepath.Dir(c.Workspace)); err != nil {
			return err
		}
	}
	if err := repo.DeleteBranch(ctx, c.Branch); err != nil {
		return err
	}
	// Recorded from the ledger's latest, so that nothing but the
	// workspace changes (a decision taken meanwhile stays).
	now, err := s.st.GetChange(ctx, c.RunID)
	if err != nil {
		return err
	}
	now.Workspace = ""
	return s.st.RecordChange(ctx, now)
}

// Collect removes the workspaces and branches of runs whose change was
// decided — applied, merged, discarded — or that changed nothing, when
// their change was last updated more than olderThan ago, and returns
// those runs' ids. A workspace a later run continued (revised) goes with
// that run's.
func (s *Supervisor) Collect(ctx context.Context, olderThan time.Duration) ([]string, error) {
	cs, err := s.st.ListChanges(ctx, store.ChangeFilter{Before: time.Now().Add(-olderThan), Patches: true,
		States: []store.ChangeState{store.ChangeApplied, store.ChangeMerged, store.ChangeDiscarded, store.ChangeNone}})
	if err != nil {
		return nil, err
	}
	var done []string
	var errs []error
	for _, c := range cs {
		if c.Branch == "" || s.lookup(c.RunID) != nil {
			continue
		}
		repo, err := gitws.Open(ctx, c.Repo)
		if err != nil {
			// The repository is gone: its workspace is of no use.
			if c.Workspace != "" && gitws.RemoveWorkspace(filepath.Dir(c.Workspace)) == nil {
				c.Workspace = ""
				if err := s.st.RecordChange(ctx, &c); err != nil { // c has its patch (Patches)
					errs = append(errs, fmt.Errorf("run %s: %w", c.RunID, err))
				}
				done = append(done, c.RunID)
			}
			continue
		}
		if have, _ := repo.Branch(ctx, c.Branch); have == "" && c.Workspace == "" {
			continue // collected before
		}
		if err := s.removeWorkspace(ctx, repo, &c); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", c.RunID, err))
			continue
		}
		done = append(done, c.RunID)
	}
	return done, errors.Join(errs...)
}
