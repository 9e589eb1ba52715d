package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
)

// inherit returns req with its working directory absolute (BND-1: the
// boundary of a run is known to any drover that reads the ledger, a
// child's in another process), and, for a child that names none, its
// parent's as the ledger recorded it.
func (s *Supervisor) inherit(ctx context.Context, req StartRequest) (StartRequest, error) {
	if req.ParentID != "" && req.Options.Cwd == "" {
		popts, err := s.parentOptions(ctx, req.ParentID)
		if err != nil {
			return req, err
		}
		req.Options.Cwd, _ = popts.WorkDirs()
	}
	req.Options.Cwd, _ = req.Options.WorkDirs()
	return req, nil
}

// parentOptions are the options run id was recorded with.
func (s *Supervisor) parentOptions(ctx context.Context, id string) (drover.Options, error) {
	var o drover.Options
	p, err := s.st.GetRun(ctx, id)
	if err != nil {
		return o, fmt.Errorf("parent run %s: %w", id, err)
	}
	if err := json.Unmarshal(p.Options, &o); err != nil {
		return o, fmt.Errorf("parent run %s: options: %w", id, err)
	}
	return o, nil
}

// bound refuses, with BOUNDARY_VIOLATION, a run beyond its boundaries:
//
//   - BND-1: a child's directories (Cwd, AddDirs) must lie within its
//     parent's, as the ledger recorded them. Boundaries only narrow down
//     the tree. The vendor's own state (ConfigDir, its home's) is each
//     run's own.
//   - BND-3: no write boundary may contain drover's own state
//     (Config.Protected): Landlock can only allow, so a boundary around the
//     ledger would let the run rewrite its own record. Only runs that have a
//     boundary are checked: those below autonomous (their vendor's own
//     flags keep them in it) and those contained (Options.Contain).
func (s *Supervisor) bound(ctx context.Context, req StartRequest) error {
	if req.ParentID != "" {
		popts, err := s.parentOptions(ctx, req.ParentID)
		if err != nil {
			return err
		}
		allowed := workDirs(popts)
		for _, d := range workDirs(req.Options) {
			if !slices.ContainsFunc(allowed, func(a string) bool { return contain.Within(d, a) }) {
				return &drover.Error{Code: drover.CodeBoundaryViolation, Message: fmt.Sprintf(
					"%s is outside the boundary of the parent run %s (%v): a child's directories narrow its parent's", d, req.ParentID, allowed)}
			}
		}
	}
	on, _ := req.Options.Containment()
	if on || req.Options.EffectiveTier() != drover.TierAutonomous {
		for _, d := range writeDirs(req.Options) {
			for _, p := range s.cfg.Protected {
				if contain.Within(contain.Resolve(p), d) {
					return &drover.Error{Code: drover.CodeBoundaryViolation, Message: fmt.Sprintf(
						"the run could write %s, which holds drover's own state (%s): choose a directory that does not contain it", d, p)}
				}
			}
		}
	}
	return nil
}

// workDirs are a run's working directory and extra directories, resolved.
func workDirs(o drover.Options) []string {
	cwd, dirs := o.WorkDirs()
	dirs = append([]string{cwd}, dirs...)
	for i, d := range dirs {
		dirs[i] = contain.Resolve(d)
	}
	return dirs
}

// writeDirs are the directories a run asks to write, resolved: its
// workDirs, its vendor's config home and its failover profiles' homes.
func writeDirs(o drover.Options) []string {
	dirs := workDirs(o)
	if o.ConfigDir != "" {
		dirs = append(dirs, contain.Resolve(o.ConfigDir))
	}
	if o.Failover != nil {
		for _, p := range o.Failover.Profiles {
			if p.ConfigDir != "" {
				dirs = append(dirs, contain.Resolve(p.ConfigDir))
			}
		}
	}
	return dirs
}
