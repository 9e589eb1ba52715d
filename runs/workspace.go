package runs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/gitws"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/store"
)

// A run's work in a git repository (docs/requirements.md §16, WS-1…WS-4;
// docs/workspaces.md). With Options.Worktree a run gets a workspace of its
// own: a clone in Config.Workspaces that borrows the user's objects, on a
// branch drover/<run id> that drover also makes in the user's repository.
// The agent's git (commits, branches, hooks, configuration) stays in the
// clone; drover reads the clone's files through the user's repository
// (gitws.Snapshot), commits the change there on the run's branch and
// records it. A run in place in a repository has its change recorded too:
// the difference from the tree its working tree held when it started.

// DefaultMaxPatch is the largest patch the ledger keeps of a change
// (Config.MaxPatch): beyond it, the files are listed and the patch is on
// the run's branch only.
const DefaultMaxPatch = 1 << 20

// checkTimeout bounds a Worktree.Check command.
const checkTimeout = 10 * time.Minute

// workspace is a run's workspace as check resolved it and Start makes it.
type workspace struct {
	repo   *gitws.Repo
	base   string // the commit it starts from
	dir    string // Config.Workspaces/<run id>/<repository's name>
	branch string // drover/<run id>
	// sub is where in the repository the run asked to work: its Cwd in
	// the workspace.
	sub string
	// revise is the change of the run a revise continues in its
	// workspace; the workspace exists then.
	revise *store.Change
}

// index is where drover keeps its own copy of the workspace's index (its
// stat data spares hashing every file at the end), beside the workspace
// where the agent cannot write.
func (w *workspace) index() string { return workspaceIndex(w.dir) }

func workspaceIndex(dir string) string { return filepath.Join(filepath.Dir(dir), "index") }

// invalid is a VALIDATION_ERROR: what the person asked for cannot be done.
func invalid(format string, a ...any) error {
	return &drover.Error{Code: drover.CodeValidation, Message: fmt.Sprintf(format, a...)}
}

// planWorkspace resolves req's workspace for run id: the repository its
// Cwd lies in and the base commit, or (revise) the workspace of the run it
// continues; req.Options.Cwd becomes the run's directory in it. Nothing is
// made yet.
func (s *Supervisor) planWorkspace(ctx context.Context, id string, req *StartRequest) (*workspace, error) {
	if s.cfg.Queue != nil {
		return nil, invalid("worktree: a queued run has no workspace yet (drover workers run in place)")
	}
	if s.cfg.Workspaces == "" {
		return nil, invalid("worktree: this drover keeps no workspaces (runs.Config.Workspaces)")
	}
	if req.Revise != nil {
		return s.planRevise(ctx, req)
	}
	cwd, _ := req.Options.WorkDirs()
	repo, base, err := ResolveWorktree(ctx, cwd, *req.Options.Worktree)
	if err != nil {
		return nil, invalid("worktree: %v", err)
	}
	real, _ := filepath.EvalSymlinks(cwd)
	sub, err := filepath.Rel(repo.Root, real)
	if err != nil || strings.HasPrefix(sub, "..") {
		sub = "."
	}
	w := &workspace{repo: repo, base: base, branch: "drover/" + id, sub: sub,
		dir: filepath.Join(s.cfg.Workspaces, id, filepath.Base(repo.Root))}
	req.Options.Cwd = filepath.Join(w.dir, sub)
	return w, nil
}

// ResolveWorktree returns the repository cwd lies in and the commit wt's
// base names ("" is HEAD): what a run with Options.Worktree starts from.
// The error says in one line why there is none: no git, no repository, no
// commit, a base that names no commit, IncludeDirty from a base other
// than HEAD (whose changes it carries). Nothing is made.
func ResolveWorktree(ctx context.Context, cwd string, wt drover.Worktree) (*gitws.Repo, string, error) {
	repo, err := gitws.Find(ctx, cwd)
	if err != nil {
		return nil, "", err
	}
	ref := wt.Base
	if ref == "" {
		ref = "HEAD"
	}
	base, err := repo.Resolve(ctx, ref)
	if err != nil {
		return nil, "", err
	}
	if wt.IncludeDirty && base != repo.Head {
		return nil, "", errors.New("--include-dirty (includeDirty) carries the changes made on HEAD, so it goes with no --base other than HEAD")
	}
	return repo, base, nil
}

// planRevise resolves the workspace of the run req.Revise, which a revise
// continues: it must have one, with a change not yet decided.
func (s *Supervisor) planRevise(ctx context.Context, req *StartRequest) (*workspace, error) {
	id := req.Revise.RunID
	c, err := s.Change(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, invalid("revise: run %s worked in no workspace of its own (drover run --worktree)", id)
	}
	if err != nil {
		return nil, err
	}
	switch {
	case c.Workspace == "":
		return nil, invalid("revise: run %s worked in place or its workspace is gone: nothing to continue", id)
	case c.State != store.ChangePending && c.State != store.ChangeNone:
		return nil, fmt.Errorf("revise: run %s's change is %s: %w", id, c.State, store.ErrConflict)
	}
	if _, err := os.Stat(c.Workspace); err != nil {
		return nil, invalid("revise: run %s's workspace: %v", id, err)
	}
	repo, err := gitws.Open(ctx, c.Repo)
	if err != nil {
		return nil, invalid("revise: %v", err)
	}
	cwd, _ := req.Options.WorkDirs()
	if !strings.HasPrefix(cwd+"/", c.Workspace+"/") {
		req.Options.Cwd = c.Workspace
	}
	return &workspace{repo: repo, base: c.Base, dir: c.Workspace, branch: c.Branch, revise: c}, nil
}

// makeWorkspace makes w for run id and returns the change it starts
// with (open), and the files of the user's working tree it does not
// carry. Nothing of it is left when it fails.
func (s *Supervisor) makeWorkspace(ctx context.Context, id string, w *workspace, req StartRequest) (*store.Change, []string, error) {
	if w.revise != nil {
		c := *w.revise
		c.RunID, c.Files, c.Patch, c.Truncated, c.Check, c.State, c.Decisions = id, nil, "", false, nil, store.ChangeOpen, nil
		c.CreatedAt = time.Time{}
		return &c, nil, nil
	}
	var left []string
	if req.Options.Worktree.IncludeDirty {
		tree, err := w.repo.Snapshot(ctx, w.repo.Root, filepath.Join(w.repo.GitDir(), "index"), w.base)
		if err != nil {
			return nil, nil, fmt.Errorf("worktree: read the uncommitted changes: %w", err)
		}
		if base, err := w.repo.Commit(ctx, tree, []string{w.base}, "uncommitted changes of "+w.repo.Root, author(req.Agent)); err != nil {
			return nil, nil, fmt.Errorf("worktree: %w", err)
		} else if cs, err := w.repo.Diff(ctx, w.base, base, 0); err == nil && len(cs.Files) > 0 {
			w.base = base
		}
	} else {
		left, _ = w.repo.Dirty(ctx)
	}
	if err := w.repo.SetBranch(ctx, w.branch, w.base, ""); err != nil {
		return nil, nil, fmt.Errorf("worktree: branch %s: %w", w.branch, err)
	}
	if err := w.repo.Workspace(ctx, w.dir, w.base, w.branch, w.index()); err != nil {
		w.repo.DeleteBranch(ctx, w.branch)
		gitws.RemoveWorkspace(filepath.Dir(w.dir))
		return nil, nil, fmt.Errorf("worktree: %w", err)
	}
	return &store.Change{RunID: id, Repo: w.repo.Root, Base: w.base, Branch: w.branch, Workspace: w.dir, State: store.ChangeOpen}, left, nil
}

// unmake removes what makeWorkspace made, for a run that could not be
// recorded.
func (w *workspace) unmake(ctx context.Context) {
	if w.revise != nil {
		return
	}
	w.repo.DeleteBranch(ctx, w.branch)
	gitws.RemoveWorkspace(filepath.Dir(w.dir))
}

// author is who drover's commits of an agent's work name.
func author(agent string) gitws.Person {
	return gitws.Person{Name: "drover (" + agent + ")", Email: "drover@localhost"}
}

// startInPlace records the change of a run working in place in a git
// repository as open, from the tree its working tree holds now; nil when
// the run works in no repository (or git cannot read it: the run goes
// on, unrecorded, and the log says why).
func (s *Supervisor) startInPlace(ctx context.Context, a *active) *store.Change {
	if s.cfg.Workspaces == "" || a.plan == nil {
		return nil
	}
	cwd, _ := a.plan.Options().WorkDirs()
	repo, err := gitws.Find(ctx, cwd)
	if err != nil {
		return nil
	}
	tree, err := repo.Snapshot(ctx, repo.Root, filepath.Join(repo.GitDir(), "index"), repo.Head)
	if err != nil {
		s.log.Warn("run's change not recorded: cannot read its working tree", "run", a.id, "repo", repo.Root, "err", err)
		return nil
	}
	c := &store.Change{RunID: a.id, Repo: repo.Root, Base: repo.Head, Start: tree, State: store.ChangeOpen}
	if err := s.st.RecordChange(ctx, c); err != nil {
		s.log.Warn("ledger: could not record the run's change", "run", a.id, "err", err)
		return nil
	}
	return c
}

// endChange reads, commits (in a workspace) and records the change of a
// run that has ended, from c as recorded when it started; with check,
// checks it first. The change is returned as recorded.
func (s *Supervisor) endChange(ctx context.Context, c *store.Change, prompt, agent, check string) (*store.Change, error) {
	repo, err := gitws.Open(ctx, c.Repo)
	if err != nil {
		return nil, err
	}
	dir, index, from := c.Repo, filepath.Join(repo.GitDir(), "index"), c.Start
	if c.Workspace != "" {
		dir, index, from = c.Workspace, workspaceIndex(c.Workspace), c.Base
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("its working tree: %w", err)
	}
	tree, err := repo.Snapshot(ctx, dir, index, from)
	if err != nil {
		return nil, err
	}
	maxPatch := s.cfg.MaxPatch
	if maxPatch <= 0 {
		maxPatch = DefaultMaxPatch
	}
	cs, err := repo.Diff(ctx, from, tree, maxPatch)
	if err != nil {
		return nil, err
	}
	c.Files = make([]store.ChangeFile, len(cs.Files))
	for i, f := range cs.Files {
		c.Files[i] = store.ChangeFile{Path: f.Path, From: f.From, Kind: string(f.Kind), Added: f.Added, Removed: f.Removed, Binary: f.Binary}
	}
	c.Patch, c.Truncated = cs.Patch, cs.Truncated
	c.State = store.ChangePending
	if len(c.Files) == 0 {
		c.State = store.ChangeNone
	}
	if c.Branch != "" && c.State == store.ChangePending {
		parent := c.Base
		if c.Commit != "" {
			parent = c.Commit // a revise builds on the pass before
		}
		commit, err := repo.Commit(ctx, tree, []string{parent}, commitMessage(prompt, c.RunID, agent), author(agent))
		if err != nil {
			return nil, err
		}
		cur, err := repo.Branch(ctx, c.Branch)
		if err != nil {
			return nil, err
		}
		if err := repo.SetBranch(ctx, c.Branch, commit, cur); err != nil {
			return nil, err
		}
		c.Commit = commit
	}
	if check != "" && c.Workspace != "" {
		c.Check = runCheck(ctx, check, dir)
	}
	if err := s.st.RecordChange(ctx, c); err != nil {
		return nil, err
	}
	return c, nil
}

// commitMessage is the message of the commit holding a run's change: the
// prompt's first line, then the prompt whole and the run.
func commitMessage(prompt, id, agent string) string {
	subject, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(subject); len(r) > 72 {
		subject = string(r[:71]) + "…"
	}
	if subject == "" {
		subject = "drover run " + id
	}
	return fmt.Sprintf("%s\n\n%s\n\nRun: %s (%s)\n", subject, strings.TrimSpace(prompt), id, agent)
}

// checkOutput is how much of a check's output is recorded: its tail.
const checkOutput = 4 << 10

// runCheck runs command with sh in dir, in a process group of its own
// killed whole when it outlasts checkTimeout or ctx, and returns its
// result. The command is the person's, not the agent's: it runs as
// drover, with drover's environment less drover's own variables.
func runCheck(ctx context.Context, command, dir string) *store.ChangeCheck {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", command)
	cmd.Dir = dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "DROVER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out tailBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := proc.OwnGroup(cmd); err != nil {
		return &store.ChangeCheck{Command: command, Output: "the check cannot run here: " + err.Error(), ExitCode: -1}
	}
	cmd.Cancel = func() error { return proc.KillGroup(cmd.Process.Pid) }
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	// Whatever the command left running in its group goes with it.
	if cmd.Process != nil {
		proc.KillGroup(cmd.Process.Pid)
	}
	r := &store.ChangeCheck{Command: command, DurationMs: time.Since(start).Milliseconds(), Output: out.String()}
	var ee *exec.ExitError
	switch {
	case err == nil:
		r.Passed = true
	case errors.As(err, &ee):
		r.ExitCode = ee.ExitCode()
	default:
		r.ExitCode = -1
		r.Output += "\n" + err.Error()
	}
	if ctx.Err() != nil {
		r.Output += fmt.Sprintf("\n(stopped after %s)", checkTimeout)
	}
	return r
}

// tailBuffer keeps the last checkOutput bytes written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*checkOutput {
		t.b = append(t.b[:0], t.b[len(t.b)-checkOutput:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	if len(t.b) > checkOutput {
		return strings.ToValidUTF8(string(t.b[len(t.b)-checkOutput:]), "")
	}
	return string(t.b)
}

// Change returns run id's change as the ledger has it, and reads it first
// when the run has ended but its change is still open (its drover ended
// before it could: a kill -9): from the workspace or working tree as the
// run left it. store.ErrNotFound when the run worked in no repository.
func (s *Supervisor) Change(ctx context.Context, id string) (*store.Change, error) {
	c, err := s.st.GetChange(ctx, id)
	if err != nil || c.State != store.ChangeOpen || s.lookup(id) != nil {
		return c, err
	}
	r, err := s.st.GetRun(ctx, id)
	if err != nil || !r.Status.Terminal() {
		return c, err
	}
	ended, err := s.endChange(ctx, c, r.Prompt, r.Agent, "")
	if err != nil {
		return nil, fmt.Errorf("run %s's change: %w", id, err)
	}
	return ended, nil
}

// endRunChange records the change of a's run, which has ended, before its
// end is recorded: whoever awaits the run finds its change. A failure is
// logged: the change stays open, and Change reads it later.
func (s *Supervisor) endRunChange(a *active) {
	ctx := context.WithoutCancel(a.ctx)
	check := ""
	if wt := a.req.Options.Worktree; wt != nil && s.ctx.Err() == nil {
		check = wt.Check
	}
	if _, err := s.endChange(ctx, a.change, a.req.Prompt, a.req.Agent, check); err != nil {
		s.log.Warn("run's change not recorded", "run", a.id, "repo", a.change.Repo, "err", err)
	}
}
