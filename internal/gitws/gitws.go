// Package gitws is drover's side of a run's work in a git repository
// (docs/requirements.md §16): finding the repository a run works in,
// giving a run a workspace of its own that shares the repository's objects
// but none of its refs, and reading the change a run made as a change set
// (base commit, files with their kind and line counts, the patch).
//
// Every git command drover runs here runs without the repository's hooks,
// file-system monitor, external diff or text conversion, pager, colour or
// signing, and Snapshot without the programs the configuration names for
// content (filters, merge drivers): for a run in place, the agent could
// write that configuration. Apply and Merge, which write the user's tree,
// use the user's repository's filters and drivers, as git would. A workspace is read through
// the user's repository, with the workspace as its working tree: its own
// .git, the agent's to write, is never read by drover's git. Other
// configuration (an include of another file, aliases) cannot make these
// commands run a program.
package gitws

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
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
	// gitDir is its git directory, absolute.
	gitDir string
}

// git runs git in dir with args and returns its standard output; an error
// carries git's own words. The environment keeps git from reading the
// user's or the system's configuration beyond the user's identity, and
// from running hooks.
func git(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	return gitIn(ctx, dir, env, nil, args...)
}

// gitIn is git with stdin as its standard input. On an error the output
// is returned too: some commands say what they found and fail (a merge
// with conflicts).
func gitIn(ctx context.Context, dir string, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{
		"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "core.pager=cat", "-c", "color.ui=false",
		"-c", "diff.external=", "-c", "core.quotePath=false"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_OPTIONAL_LOCKS=0")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Stdin = stdin
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
		return out, e
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
	gitDir, err := git(ctx, root, nil, "rev-parse", "--absolute-git-dir")
	if err != nil {
		return nil, err
	}
	return &Repo{Root: root, Head: strings.TrimSpace(string(head)), gitDir: strings.TrimSpace(string(gitDir))}, nil
}

// Open returns the repository whose working tree's top is root, as Find
// does, for a repository recorded before.
func Open(ctx context.Context, root string) (*Repo, error) {
	r, err := Find(ctx, root)
	if err != nil {
		return nil, err
	}
	if real, _ := filepath.EvalSymlinks(root); r.Root != filepath.Clean(root) && real != r.Root {
		return nil, fmt.Errorf("%s is not the top of a git repository", root)
	}
	return r, nil
}

// GitDir is r's git directory, absolute (its index is GitDir/index).
func (r *Repo) GitDir() string { return r.gitDir }

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
// its own, checked out at commit on a new branch. The agent may commit,
// branch and reset there; none of it reaches r's refs or objects, which
// drover alone writes (Snapshot, Commit, SetBranch). The clone's index,
// as the checkout left it, is copied to index (outside the workspace,
// where the agent cannot change it): Snapshot's head start.
func (r *Repo) Workspace(ctx context.Context, dir, commit, branch, index string) error {
	if _, err := os.Stat(dir); err == nil {
		return fmt.Errorf("workspace %s exists already", dir)
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return err
	}
	if _, err := git(ctx, r.Root, nil, "clone", "--quiet", "--shared", "--no-checkout", "--", r.Root, dir); err != nil {
		return err
	}
	fail := func(err error) error {
		RemoveWorkspace(dir)
		return err
	}
	if _, err := git(ctx, dir, nil, "checkout", "--quiet", "-b", branch, commit); err != nil {
		return fail(err)
	}
	if index != "" {
		if err := copyFile(filepath.Join(dir, ".git", "index"), index); err != nil {
			return fail(err)
		}
	}
	return nil
}

// RemoveWorkspace removes a workspace directory and everything in it,
// whatever modes the agent left on its files and directories.
func RemoveWorkspace(dir string) error {
	if err := os.RemoveAll(dir); err == nil {
		return nil
	}
	// A directory the agent made read-only keeps its entries: open it up.
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			os.Chmod(path, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o600)
}

// in returns the environment that makes git, run in dir, work on r's
// repository with dir as its working tree and index as its index: dir's
// own .git (the agent's, in a workspace) is never read.
func (r *Repo) in(dir, index string) []string {
	return []string{"GIT_DIR=" + r.gitDir, "GIT_WORK_TREE=" + dir, "GIT_INDEX_FILE=" + index}
}

// Snapshot writes the tree the working tree at dir holds — tracked and
// untracked files, ignored ones not, by the ignore rules of dir and r —
// into r's objects and returns its id. index, when not "", is an index
// that described dir's files at some point (r's own, a workspace's copy):
// it is copied, never changed, and spares hashing the files it still
// describes; without it dir is read against base. No filter the
// repository's configuration defines runs.
func (r *Repo) Snapshot(ctx context.Context, dir, index, base string) (string, error) {
	tmp, err := os.CreateTemp("", "drover-index-*")
	if err != nil {
		return "", err
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	env := r.in(dir, tmp.Name())
	if index == "" || copyFile(index, tmp.Name()) != nil {
		if _, err := git(ctx, dir, env, "read-tree", base); err != nil {
			return "", err
		}
	}
	noFilters, err := r.overrides(ctx)
	if err != nil {
		return "", err
	}
	env = append(env, noFilters...)
	if _, err := git(ctx, dir, env, "add", "--all", "--", "."); err != nil {
		return "", err
	}
	out, err := git(ctx, dir, env, "write-tree")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// Person names the author of a commit drover makes.
type Person struct{ Name, Email string }

// Commit makes a commit of tree with parents in r, without signing it, and
// returns its id. It moves no ref.
func (r *Repo) Commit(ctx context.Context, tree string, parents []string, message string, author Person) (string, error) {
	args := []string{"commit-tree", "--no-gpg-sign", "-m", message}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	env := []string{"GIT_AUTHOR_NAME=" + author.Name, "GIT_AUTHOR_EMAIL=" + author.Email,
		"GIT_COMMITTER_NAME=" + author.Name, "GIT_COMMITTER_EMAIL=" + author.Email}
	out, err := git(ctx, r.Root, env, append(args, tree)...)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// SetBranch points branch (refs/heads/branch) of r at commit, if it now
// points at old ("" = if it does not exist): a branch moved by someone
// else meanwhile is not overwritten.
func (r *Repo) SetBranch(ctx context.Context, branch, commit, old string) error {
	if old == "" {
		old = strings.Repeat("0", len(commit))
	}
	_, err := git(ctx, r.Root, nil, "update-ref", "-m", "drover", "refs/heads/"+branch, commit, old)
	return err
}

// Branch returns the commit branch names in r, "" when there is no such
// branch.
func (r *Repo) Branch(ctx context.Context, branch string) (string, error) {
	out, err := git(ctx, r.Root, nil, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	var ge *gitError
	if errors.As(err, &ge) && ge.code == 1 {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(out)), nil
}

// DeleteBranch deletes branch of r; a branch that does not exist is not an
// error.
func (r *Repo) DeleteBranch(ctx context.Context, branch string) error {
	c, err := r.Branch(ctx, branch)
	if err != nil || c == "" {
		return err
	}
	_, err = git(ctx, r.Root, nil, "update-ref", "-d", "refs/heads/"+branch, c)
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

// Diff reads the change from the tree-ish from to the tree-ish to of r as
// a change set: files with their kind and line counts (renames found),
// and the patch. A patch over maxPatch bytes is left out (Truncated) but
// its files are listed. Base is from.
func (r *Repo) Diff(ctx context.Context, from, to string, maxPatch int) (*ChangeSet, error) {
	diff := []string{"diff-tree", "-r", "-M", "--no-ext-diff", "--no-textconv", from, to}
	status, err := git(ctx, r.Root, nil, append(diff, "--name-status", "-z")...)
	if err != nil {
		return nil, err
	}
	numstat, err := git(ctx, r.Root, nil, append(diff, "--numstat", "-z")...)
	if err != nil {
		return nil, err
	}
	cs := &ChangeSet{Base: from}
	if cs.Files, err = parseChanges(string(status), string(numstat)); err != nil {
		return nil, err
	}
	if len(cs.Files) == 0 {
		return cs, nil
	}
	patch, err := git(ctx, r.Root, nil, append(diff, "--patch", "--binary", "--full-index")...)
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

// overrides returns the environment that turns off, for git in r, every
// program its configuration names for content: filters (a clean filter
// is a command git add runs) and merge drivers — GIT_CONFIG_COUNT
// entries blanking filter.NAME.clean, .smudge, .process (and .required)
// and merge.NAME.driver. For a run in place the agent could write r's
// configuration. Reading the configuration runs nothing.
func (r *Repo) overrides(ctx context.Context) ([]string, error) {
	out, err := git(ctx, r.Root, nil, "config", "--null", "--name-only", "--get-regexp", `^(filter|merge)\.`)
	var ge *gitError
	if errors.As(err, &ge) && ge.code == 1 {
		return nil, nil // none
	}
	if err != nil {
		return nil, err
	}
	var env []string
	n := 0
	set := func(key, value string) {
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", n, key), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", n, value))
		n++
	}
	for key := range strings.SplitSeq(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		i := strings.LastIndexByte(key, '.')
		if i < 0 {
			continue
		}
		name := key[:i]
		switch {
		case strings.HasPrefix(key, "filter."):
			set(name+".clean", "")
			set(name+".smudge", "")
			set(name+".process", "")
			set(name+".required", "false")
		case strings.HasPrefix(key, "merge.") && strings.HasSuffix(key, ".driver"):
			set(key, "")
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
