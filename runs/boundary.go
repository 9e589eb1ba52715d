package runs

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
)

// bound returns req as it will run within its boundaries, or a
// BOUNDARY_VIOLATION error:
//
//   - BND-1: a child's directories (Cwd, AddDirs) must lie within its
//     parent's, as the ledger recorded them; a child that names no working
//     directory gets its parent's. Boundaries only narrow down the tree.
//     The vendor's own state (ConfigDir, its home's) is each run's own.
//   - BND-3: no write boundary may contain drover's own state
//     (Config.Protected): Landlock can only allow, so a boundary around the
//     ledger would let the run rewrite its own record. Only runs that have a
//     boundary are checked: those below autonomous (their vendor's own
//     flags keep them in it) and those contained (Options.Contain).
//
// The run's working directory is recorded absolute, so that the boundary
// of a run is known to any drover that reads the ledger (a child's, in
// another process).
func (s *Supervisor) bound(ctx context.Context, req StartRequest) (StartRequest, error) {
	if req.ParentID != "" {
		p, err := s.st.GetRun(ctx, req.ParentID)
		if err != nil {
			return req, fmt.Errorf("parent run %s: %w", req.ParentID, err)
		}
		var popts drover.Options
		if err := json.Unmarshal(p.Options, &popts); err != nil {
			return req, fmt.Errorf("parent run %s: options: %w", req.ParentID, err)
		}
		if req.Options.Cwd == "" {
			req.Options.Cwd, _ = popts.WorkDirs()
		}
		allowed := workDirs(popts)
		for _, d := range workDirs(req.Options) {
			if !slices.ContainsFunc(allowed, func(a string) bool { return contain.Within(d, a) }) {
				return req, &drover.Error{Code: drover.CodeBoundaryViolation, Message: fmt.Sprintf(
					"%s is outside the boundary of the parent run %s (%v): a child's directories narrow its parent's", d, req.ParentID, allowed)}
			}
		}
	}
	on, _ := req.Options.Containment()
	if on || req.Options.EffectiveTier() != drover.TierAutonomous {
		for _, d := range writeDirs(req.Options) {
			for _, p := range s.cfg.Protected {
				if contain.Within(contain.Resolve(p), d) {
					return req, &drover.Error{Code: drover.CodeBoundaryViolation, Message: fmt.Sprintf(
						"the run could write %s, which holds drover's own state (%s): choose a directory that does not contain it", d, p)}
				}
			}
		}
	}
	req.Options.Cwd, _ = req.Options.WorkDirs()
	return req, nil
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
