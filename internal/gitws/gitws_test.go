package gitws

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// repo makes a repository in a new directory with one commit of files.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	run(t, dir, "init", "--quiet", "--initial-branch=main")
	for name, body := range files {
		write(t, filepath.Join(dir, name), body)
	}
	run(t, dir, "add", "--all")
	run(t, dir, "commit", "--quiet", "-m", "base")
	return dir
}

// run runs git in dir as a person would, failing the test on an error.
func run(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=t", "-c", "user.email=t@example.test"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWS1_FindRefusesWhatCannotHoldAWorkspace: a directory outside any
// repository and a repository with no commit are refused with their own
// errors; a subdirectory of a repository finds its root and HEAD.
func TestWS1_FindRefusesWhatCannotHoldAWorkspace(t *testing.T) {
	ctx := context.Background()
	if _, err := Find(ctx, t.TempDir()); !errors.Is(err, ErrNotRepo) {
		t.Errorf("outside a repository: %v", err)
	}
	empty := t.TempDir()
	run(t, empty, "init", "--quiet")
	if _, err := Find(ctx, empty); !errors.Is(err, ErrNoCommit) {
		t.Errorf("no commit: %v", err)
	}
	dir := repo(t, map[string]string{"sub/a.txt": "a\n"})
	r, err := Find(ctx, filepath.Join(dir, "sub"))
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.EvalSymlinks(dir)
	if r.Root != root || r.Head != run(t, dir, "rev-parse", "HEAD") {
		t.Errorf("found %+v, want %s at %s", r, root, run(t, dir, "rev-parse", "HEAD"))
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := Find(ctx, dir); !errors.Is(err, ErrNoGit) {
		t.Errorf("without git: %v", err)
	}
}

// TestWS2_ChangeSet: a change set holds added (untracked), modified,
// deleted, renamed and binary files with their line counts and a patch git
// applies; ignored files are not in it; the repository's own index is
// untouched; a patch over the limit is left out but its files listed.
func TestWS2_ChangeSet(t *testing.T) {
	ctx := context.Background()
	dir := repo(t, map[string]string{
		"keep.txt": "1\n2\n3\n", "gone.txt": "bye\n", "old/name.txt": "a long enough line to find a rename by\nsecond\n",
		".gitignore": "*.log\n",
	})
	base := run(t, dir, "rev-parse", "HEAD")
	write(t, filepath.Join(dir, "keep.txt"), "1\nTWO\n3\n4\n")
	os.Remove(filepath.Join(dir, "gone.txt"))
	os.MkdirAll(filepath.Join(dir, "new"), 0o755)
	if err := os.Rename(filepath.Join(dir, "old/name.txt"), filepath.Join(dir, "new/name.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "added.txt"), "x\ny\n")
	write(t, filepath.Join(dir, "debug.log"), "ignored\n")
	if err := os.WriteFile(filepath.Join(dir, "blob.bin"), []byte{0, 1, 2, 0, 255}, 0o644); err != nil {
		t.Fatal(err)
	}
	index := run(t, dir, "status", "--porcelain")
	r, err := Find(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := r.Snapshot(ctx, dir, filepath.Join(r.GitDir(), "index"), base)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := r.Diff(ctx, base, tree, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	want := []File{
		{Path: "added.txt", Kind: Added, Added: 2},
		{Path: "blob.bin", Kind: Added, Binary: true},
		{Path: "gone.txt", Kind: Deleted, Removed: 1},
		{Path: "keep.txt", Kind: Modified, Added: 2, Removed: 1},
		{Path: "new/name.txt", From: "old/name.txt", Kind: Renamed},
	}
	if !slices.Equal(cs.Files, want) {
		t.Errorf("files:\n got %+v\nwant %+v", cs.Files, want)
	}
	if got := run(t, dir, "status", "--porcelain"); got != index {
		t.Errorf("the repository's index changed:\n%s\nwas\n%s", got, index)
	}
	// The patch rebuilds the change on a clean copy of base.
	clean := t.TempDir()
	run(t, clean, "clone", "--quiet", dir, ".")
	run(t, clean, "checkout", "--quiet", base)
	patch := filepath.Join(t.TempDir(), "p")
	write(t, patch, cs.Patch)
	run(t, clean, "apply", "--index", patch)
	for _, f := range []string{"keep.txt", "added.txt", "new/name.txt", "blob.bin"} {
		a, _ := os.ReadFile(filepath.Join(dir, f))
		b, _ := os.ReadFile(filepath.Join(clean, f))
		if string(a) != string(b) {
			t.Errorf("%s after git apply: %q, want %q", f, b, a)
		}
	}

	small, err := r.Diff(ctx, base, tree, 10)
	if err != nil || !small.Truncated || small.Patch != "" || len(small.Files) != len(want) {
		t.Errorf("over the limit: %+v %v", small, err)
	}
	run(t, dir, "stash", "--include-untracked", "--quiet")
	// Without the index to start from, the same tree.
	clean2, err := r.Snapshot(ctx, dir, "", base)
	if err != nil {
		t.Fatal(err)
	}
	if none, err := r.Diff(ctx, base, clean2, 1<<20); err != nil || len(none.Files) != 0 || none.Patch != "" {
		t.Errorf("no change: %+v %v", none, err)
	}
}

// TestWS1_WorkspaceKeepsTheUsersRefs: a workspace starts at its base on
// its own branch; what the agent does to refs there — commit, delete or
// move a branch, a hook and a filter in its .git — leaves the user's
// repository's refs as they were and runs nothing when drover reads it;
// only drover's commit on the run's branch reaches the user's repository.
func TestWS1_WorkspaceKeepsTheUsersRefs(t *testing.T) {
	ctx := context.Background()
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	r, err := Find(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	refs := run(t, dir, "show-ref")
	tmp := t.TempDir()
	ws, index := filepath.Join(tmp, "ws"), filepath.Join(tmp, "index")
	if err := r.Workspace(ctx, ws, r.Head, "drover/run_1", index); err != nil {
		t.Fatal(err)
	}
	if got := run(t, ws, "rev-parse", "--abbrev-ref", "HEAD"); got != "drover/run_1" {
		t.Errorf("workspace on %s", got)
	}
	// The agent's git, in its workspace.
	write(t, filepath.Join(ws, "b.txt"), "b\n")
	run(t, ws, "add", "b.txt")
	run(t, ws, "commit", "--quiet", "-m", "agent")
	run(t, ws, "branch", "-D", "main")
	run(t, ws, "branch", "evil")
	pwned := filepath.Join(tmp, "pwned")
	run(t, ws, "config", "filter.evil.clean", "touch "+pwned+"; cat")
	write(t, filepath.Join(ws, ".gitattributes"), "* filter=evil\n")
	write(t, filepath.Join(ws, ".git/hooks/post-commit"), "#!/bin/sh\ntouch "+pwned+"\n")
	os.Chmod(filepath.Join(ws, ".git/hooks/post-commit"), 0o755)
	write(t, filepath.Join(ws, "c.txt"), "uncommitted\n")
	if got := run(t, dir, "show-ref"); got != refs {
		t.Fatalf("the user's refs changed:\n%s\nwere\n%s", got, refs)
	}
	tree, err := r.Snapshot(ctx, ws, index, r.Head)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := r.Commit(ctx, tree, []string{r.Head}, "run_1", Person{"drover (claude)", "drover@localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.SetBranch(ctx, "drover/run_1", commit, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.SetBranch(ctx, "drover/run_1", r.Head, r.Head); err == nil {
		t.Error("SetBranch moved a branch that was not where it was said to be")
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the workspace's filter or hook ran as drover")
	}
	if got := run(t, dir, "show", "--name-only", "--format=%an", "drover/run_1"); got != "drover (claude)\n\n.gitattributes\nb.txt\nc.txt" {
		t.Errorf("the run's commit: %q", got)
	}
	if strings.Contains(run(t, dir, "branch", "--list"), "evil") {
		t.Error("a branch the agent made reached the user's repository")
	}
	if err := r.Workspace(ctx, ws, r.Head, "drover/run_2", ""); err == nil {
		t.Error("a workspace made over an existing directory")
	}
	if err := r.DeleteBranch(ctx, "drover/run_1"); err != nil {
		t.Fatal(err)
	}
	if c, err := r.Branch(ctx, "drover/run_1"); err != nil || c != "" {
		t.Errorf("deleted branch: %q %v", c, err)
	}
	os.Chmod(filepath.Join(ws, ".git"), 0o500)
	if err := RemoveWorkspace(ws); err != nil {
		t.Fatal(err)
	}
}

// TestWS3_ApplyWholeOrNotAtAll: a change applies to the working tree; a
// second time it says so; a change that conflicts names the file and
// changes nothing, though another of its files would have applied.
func TestWS3_ApplyWholeOrNotAtAll(t *testing.T) {
	ctx := context.Background()
	dir := repo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r, _ := Find(ctx, dir)
	other := t.TempDir()
	run(t, other, "clone", "--quiet", dir, ".")
	write(t, filepath.Join(other, "a.txt"), "A\n")
	write(t, filepath.Join(other, "hello.txt"), "hello\n")
	tree, err := r.Snapshot(ctx, other, "", r.Head)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := r.Diff(ctx, r.Head, tree, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// hello.txt exists with other content: the whole patch is refused.
	write(t, filepath.Join(dir, "hello.txt"), "mine\n")
	var ce *ConflictError
	if err := r.Apply(ctx, cs.Patch); !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"hello.txt"}) {
		t.Fatalf("apply over a conflicting file: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(b) != "a\n" {
		t.Errorf("a.txt changed by a refused apply: %q", b)
	}
	os.Remove(filepath.Join(dir, "hello.txt"))
	if err := r.Apply(ctx, cs.Patch); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "hello.txt")); string(b) != "hello\n" {
		t.Errorf("hello.txt: %q", b)
	}
	if err := r.Apply(ctx, cs.Patch); !errors.Is(err, ErrApplied) {
		t.Errorf("applied twice: %v", err)
	}
}

// TestWS3_MergeNothingHalfDone: a run's branch merges as one squashed
// commit on the current branch, after the branch moved on; a conflict
// between the branches, or a local change in the way, names the file and
// leaves HEAD, index and working tree as they were.
func TestWS3_MergeNothingHalfDone(t *testing.T) {
	ctx := context.Background()
	dir := repo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	r, _ := Find(ctx, dir)
	base := r.Head
	branch := func(name string, files map[string]string) {
		other := t.TempDir()
		run(t, other, "clone", "--quiet", dir, ".")
		run(t, other, "checkout", "--quiet", base)
		for f, body := range files {
			write(t, filepath.Join(other, f), body)
		}
		tree, err := r.Snapshot(ctx, other, "", base)
		if err != nil {
			t.Fatal(err)
		}
		c, err := r.Commit(ctx, tree, []string{base}, name, Person{"drover", "drover@localhost"})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.SetBranch(ctx, name, c, ""); err != nil {
			t.Fatal(err)
		}
	}
	branch("drover/one", map[string]string{"hello.txt": "one\n"})
	branch("drover/two", map[string]string{"hello.txt": "two\n"})
	branch("drover/three", map[string]string{"b.txt": "B\n"})
	// The user's branch moves on meanwhile.
	write(t, filepath.Join(dir, "a.txt"), "a2\n")
	run(t, dir, "commit", "--quiet", "-am", "mine")
	commit, err := r.Merge(ctx, "drover/one", true, "one", Person{"drover", "drover@localhost"})
	if err != nil {
		t.Fatal(err)
	}
	if got := run(t, dir, "rev-parse", "HEAD"); got != commit {
		t.Errorf("HEAD %s, want the merge %s", got, commit)
	}
	if got := run(t, dir, "log", "--format=%s", "-3"); got != "one\nmine\nbase" {
		t.Errorf("history: %q", got)
	}
	if got := run(t, dir, "status", "--porcelain"); got != "" {
		t.Errorf("after the merge the tree is not clean: %q", got)
	}
	if _, err := r.Merge(ctx, "drover/one", true, "one", Person{"drover", "drover@localhost"}); !errors.Is(err, ErrApplied) {
		t.Errorf("merged twice: %v", err)
	}
	head := run(t, dir, "rev-parse", "HEAD")
	var ce *ConflictError
	if _, err := r.Merge(ctx, "drover/two", true, "two", Person{"drover", "drover@localhost"}); !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"hello.txt"}) {
		t.Errorf("conflicting branches: %v", err)
	}
	write(t, filepath.Join(dir, "b.txt"), "local\n")
	if _, err := r.Merge(ctx, "drover/three", true, "three", Person{"drover", "drover@localhost"}); !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"b.txt"}) {
		t.Errorf("a local change in the way: %v", err)
	}
	os.Remove(filepath.Join(dir, "b.txt"))
	run(t, dir, "checkout", "--quiet", "b.txt")
	branch("drover/four", map[string]string{"new.txt": "theirs\n"})
	write(t, filepath.Join(dir, "new.txt"), "untracked\n")
	if _, err := r.Merge(ctx, "drover/four", true, "four", Person{"drover", "drover@localhost"}); !errors.As(err, &ce) || !slices.Equal(ce.Files, []string{"new.txt"}) {
		t.Errorf("an untracked file in the way: %v", err)
	}
	os.Remove(filepath.Join(dir, "new.txt"))
	write(t, filepath.Join(dir, "b.txt"), "local\n")
	if got := run(t, dir, "rev-parse", "HEAD"); got != head {
		t.Error("a refused merge moved HEAD")
	}
	if got := run(t, dir, "status", "--porcelain"); got != "M b.txt" {
		t.Errorf("a refused merge touched the tree: %q", got)
	}
}

// TestWS1_DirtyListsWhatAWorkspaceLeavesBehind: uncommitted and untracked
// files are listed, ignored ones not.
func TestWS1_DirtyListsWhatAWorkspaceLeavesBehind(t *testing.T) {
	ctx := context.Background()
	dir := repo(t, map[string]string{"a.txt": "a\n", ".gitignore": "*.log\n"})
	r, err := Find(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := r.Dirty(ctx); err != nil || len(d) != 0 {
		t.Fatalf("clean: %v %v", d, err)
	}
	write(t, filepath.Join(dir, "a.txt"), "changed\n")
	write(t, filepath.Join(dir, "new.txt"), "n\n")
	write(t, filepath.Join(dir, "x.log"), "ignored\n")
	d, err := r.Dirty(ctx)
	slices.Sort(d)
	if err != nil || !slices.Equal(d, []string{"a.txt", "new.txt"}) {
		t.Errorf("dirty: %v %v", d, err)
	}
}

// TestWS2_ChangeRunsNoFilterOfTheWorkspace: a clean filter the repository's
// configuration defines (a command git add would run, which an agent in
// place can write there) is not run when drover reads the change; without the
// override git runs it (the control).
func TestWS2_ChangeRunsNoFilterOfTheWorkspace(t *testing.T) {
	ctx := context.Background()
	dir := repo(t, map[string]string{"a.txt": "a\n"})
	base := run(t, dir, "rev-parse", "HEAD")
	pwned := filepath.Join(t.TempDir(), "pwned")
	run(t, dir, "config", "filter.evil.clean", "touch "+pwned+"; cat")
	run(t, dir, "config", "filter.evil.required", "true")
	write(t, filepath.Join(dir, ".gitattributes"), "* filter=evil\n")
	write(t, filepath.Join(dir, "a.txt"), "changed\n")
	r, err := Find(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := r.Snapshot(ctx, dir, "", base)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := r.Diff(ctx, base, tree, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Fatal("the workspace's clean filter ran")
	}
	if len(cs.Files) != 2 {
		t.Errorf("files %+v", cs.Files)
	}
	run(t, dir, "add", "a.txt")
	if _, err := os.Stat(pwned); err != nil {
		t.Fatalf("the control: git add did not run the filter, so the test proves nothing: %v", err)
	}
}
