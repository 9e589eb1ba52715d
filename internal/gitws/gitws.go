// Package gitws is drover's side of a run's work in a git repository
// (docs/requirements.md §16): finding the repository a run works in,
// giving a run a workspace of its own that shares the repository's objects
// but none of its refs, and reading the change a run made as a change set
// (base commit, files with their kind and line counts, the patch).
//
// Every git command drover runs here runs without the repository's hooks,
// file-system monitor, external diff or text conversion, pager or colour,
// and Change without the filters the repository's configuration defines
// (a clean filter is a command git add runs): a workspace's .git is the
// agent's to write, and what it configures there never runs as drover.
// Other configuration (an include of another file, aliases) cannot make
// these commands run a program.
package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// Errors of Find, each one clear line for the person who asked for a
// workspace.
var (
	ErrNoGit    = errors.New("git is not on PATH")
	ErrNotRepo  = errors.New("not in a git repository")
	ErrNoCommit = errors.New("the repository has no commit yet")
)

// Repo is a git repository a run works in.
type Repo struct {
	// Root is the top of its working tree, absolute.
	Root string
	// Head is the commit HEAD names, in full.
	Head string
}

// git runs git in dir with args and returns its standard output; an error
// carries git's own words. The environment keeps git from reading the
// user's or the system's configuration beyond the user's identity, and
// from running hooks.
func git(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat", "-c", "color.ui=false",
		"-c", "diff.external=", "-c", "core.quotePath=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return nil, ErrNoGit
		}
		e := &gitError{cmd: args[0], msg: strings.TrimSpace(stderr.String())}
		if ee, ok := err.(*exec.ExitError); ok {
			e.code = ee.ExitCode()
		}
		if e.msg == "" {
			e.msg = err.Error()
		}
		return nil, e
	}
	return out, nil
}

// gitError is a git command that failed: its exit status and git's words.
type gitError struct {
	cmd, msg string
	code     int
}

func (e *gitError) Error() string { return "git " + e.cmd + ": " + e.msg }

// Find returns the repository dir lies in: ErrNoGit, ErrNotRepo or
// ErrNoCommit when there is none a workspace can be made from.
func Find(ctx context.Context, dir string) (*Repo, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, ErrNoGit
	}
	out, err := git(ctx, dir, nil, "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, ErrNotRepo)
	}
	root := strings.TrimSpace(string(out))
	head, err := git(ctx, root, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	if err != nil {
		return nil, fmt.Errorf("%s: %w", root, ErrNoCommit)
	}
	return &Repo{Root: root, Head: strings.TrimSpace(string(head))}, nil
}

// Resolve returns the commit ref names in r, in full.
func (r *Repo) Resolve(ctx context.Context, ref string) (string, error) {
	out, err := git(ctx, r.Root, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", ref+"^{commit}")
	if err != nil {
		return "", fmt.Errorf("%s names no commit of %s", ref, r.Root)
	}
	return strings.TrimSpace(string(out)), nil
}

// Dirty lists the paths of r's working tree that differ from HEAD,
// untracked ones included, ignored ones not: what a workspace made from
// HEAD does not carry.
func (r *Repo) Dirty(ctx context.Context) ([]string, error) {
	out, err := git(ctx, r.Root, nil, "status", "--porcelain=v1", "-z", "--untracked-files=all")
	if err != nil {
		return nil, err
	}
	var paths []string
	for entry := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		if len(entry) > 3 {
			paths = append(paths, entry[3:])
		}
	}
	return paths, nil
}

// Workspace makes dir (which must not exist) a workspace of r's for a run:
// a clone that borrows r's objects (git clone --shared) and has refs of
// its own, checked out at base on a new branch. The agent may commit,
// branch and reset there; none of it reaches r's refs, which drover alone
// writes (Fetch). r's objects are only read.
func (r *Repo) Workspace(ctx context.Context, dir, base, branch string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("workspace %s exists already", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if _, err := git(ctx, r.Root, nil, "clone", "--quiet", "--shared", "--no-checkout", "--", r.Root, dir); err != nil {
		return err
	}
	if _, err := git(ctx, dir, nil, "checkout", "--quiet", "-b", branch, base); err != nil {
		os.RemoveAll(dir)
		return err
	}
	return nil
}

// Fetch copies branch of the workspace at dir into r as the branch of the
// same name (refs/heads/branch), creating or moving it: the run's work
// reaches r only through this, and only on its own branch.
func (r *Repo) Fetch(ctx context.Context, dir, branch string) error {
	_, err := git(ctx, r.Root, nil, "fetch", "--quiet", "--no-tags", "--force", "--", dir, "refs/heads/"+branch+":refs/heads/"+branch)
	return err
}

// Kind is how a change set's file changed.
type Kind string

// The kinds of a file's change.
const (
	Added    Kind = "added"
	Modified Kind = "modified"
	Deleted  Kind = "deleted"
	Renamed  Kind = "renamed"
)

// File is one file of a change set.
type File struct {
	Path string `json:"path"`
	// From is the path a renamed file had.
	From string `json:"from,omitempty"`
	Kind Kind   `json:"kind"`
	// Added and Removed count lines; a binary file has neither.
	Added   int  `json:"added"`
	Removed int  `json:"removed"`
	Binary  bool `json:"binary,omitempty"`
}

// ChangeSet is what a run changed in a working tree since base.
type ChangeSet struct {
	Base  string `json:"base"`
	Files []File `json:"files"`
	// Patch is the change as git apply takes it (binary files included),
	// "" when it is over the limit Change was given: then Truncated.
	Patch     string `json:"patch,omitempty"`
	Truncated bool   `json:"truncated,omitempty"`
}

// Change reads the change of the working tree at dir against the commit
// base: tracked and untracked files, ignored ones not, renames found. The
// repository's own index is not touched: a temporary one holds the tree.
// A patch over maxPatch bytes is left out (Truncated) but its files are
// listed.
func Change(ctx context.Context, dir, base string, maxPatch int) (*ChangeSet, error) {
	idx, err := os.CreateTemp("", "drover-index-*")
	if err != nil {
		return nil, err
	}
	idx.Close()
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	if _, err := git(ctx, dir, env, "read-tree", base); err != nil {
		return nil, err
	}
	noFilters, err := filterOverrides(ctx, dir)
	if err != nil {
		return nil, err
	}
	env = append(env, noFilters...)
	if _, err := git(ctx, dir, env, "add", "--all", "--", "."); err != nil {
		return nil, err
	}
	diff := []string{"diff", "--cached", "-M", "--no-ext-diff", "--no-textconv", base}
	status, err := git(ctx, dir, env, append(diff, "--name-status", "-z")...)
	if err != nil {
		return nil, err
	}
	numstat, err := git(ctx, dir, env, append(diff, "--numstat", "-z")...)
	if err != nil {
		return nil, err
	}
	cs := &ChangeSet{Base: base}
	if cs.Files, err = parseChanges(string(status), string(numstat)); err != nil {
		return nil, err
	}
	if len(cs.Files) == 0 {
		return cs, nil
	}
	patch, err := git(ctx, dir, env, append(diff, "--binary", "--full-index")...)
	if err != nil {
		return nil, err
	}
	if len(patch) > maxPatch {
		cs.Truncated = true
	} else {
		cs.Patch = string(patch)
	}
	return cs, nil
}

// filterOverrides returns the environment that turns off, for git in
// dir, every filter its configuration defines (GIT_CONFIG_COUNT entries
// blanking filter.NAME.clean, .smudge and .process, and .required).
// Reading the configuration runs nothing.
func filterOverrides(ctx context.Context, dir string) ([]string, error) {
	out, err := git(ctx, dir, nil, "config", "--null", "--name-only", "--get-regexp", `^filter\.`)
	var ge *gitError
	if errors.As(err, &ge) && ge.code == 1 {
		return nil, nil // no filter
	}
	if err != nil {
		return nil, err
	}
	var env []string
	n := 0
	for key := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		i := strings.LastIndexByte(key, '.')
		if i < 0 {
			continue
		}
		name := key[:i]
		for _, k := range []string{".clean", ".smudge", ".process", ".required"} {
			v := ""
			if k == ".required" {
				v = "false"
			}
			env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s%s", n, name, k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, v))
			n++
		}
	}
	if n == 0 {
		return nil, nil
	}
	return append(env, "GIT_CONFIG_COUNT="+strconv.Itoa(n)), nil
}

// parseChanges reads git diff's -z --name-status and --numstat of the
// same diff into files.
func parseChanges(status, numstat string) ([]File, error) {
	var files []File
	f := strings.Split(strings.TrimSuffix(status, "\x00"), "\x00")
	for i := 0; i < len(f) && f[i] != ""; {
		code := f[i]
		file := File{}
		switch code[0] {
		case 'A':
			file.Kind = Added
		case 'M', 'T':
			file.Kind = Modified
		case 'D':
			file.Kind = Deleted
		case 'R', 'C':
			file.Kind = Renamed
			if i+2 >= len(f) {
				return nil, fmt.Errorf("git diff --name-status: a rename without its paths")
			}
			file.From, file.Path = f[i+1], f[i+2]
			files = append(files, file)
			i += 3
			continue
		default:
			return nil, fmt.Errorf("git diff --name-status: status %q", code)
		}
		if i+1 >= len(f) {
			return nil, fmt.Errorf("git diff --name-status: status %q without a path", code)
		}
		file.Path = f[i+1]
		files = append(files, file)
		i += 2
	}
	// --numstat -z: "ADDED\tREMOVED\tPATH\0", or for a rename
	// "ADDED\tREMOVED\t\0FROM\0TO\0"; "-" counts for a binary file.
	n := strings.Split(strings.TrimSuffix(numstat, "\x00"), "\x00")
	for i, k := 0, 0; i < len(n) && n[i] != "" && k < len(files); k++ {
		parts := strings.SplitN(n[i], "\t", 3)
		if len(parts) != 3 {
			return nil, fmt.Errorf("git diff --numstat: %q", n[i])
		}
		i++
		if parts[2] == "" {
			i += 2 // a rename's two paths follow
		}
		if parts[0] == "-" {
			files[k].Binary = true
			continue
		}
		files[k].Added, _ = strconv.Atoi(parts[0])
		files[k].Removed, _ = strconv.Atoi(parts[1])
	}
	return files, nil
}
