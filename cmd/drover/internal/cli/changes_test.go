package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// The tests of runs' workspaces and changes through the CLI (WS-1…WS-4,
// docs/requirements.md §16): a real git repository in a temporary
// directory, drover's state (ledger and workspaces) in another, and the
// test binary as the agent in one of the ws-* modes below.

// wsWriteEnv holds the files the fake agent in a ws-* mode writes, as a
// JSON object path → content: relative paths are in its working
// directory; a content of null deletes the file.
const wsWriteEnv = "DROVERTEST_WRITE"

func init() {
	// Before TestMain: the modes of fakeClaude are cli_test.go's; these
	// are this file's.
	if mode := os.Getenv(fakeEnv); strings.HasPrefix(mode, "ws-") {
		wsAgent(mode)
		os.Exit(0)
	}
}

// wsAgent is the fake agent of the ws-* modes: it writes the files
// wsWriteEnv names, says what it did (and any error) in a text, then
// ends its turn (ws-write) or waits to be killed (ws-write-hang).
func wsAgent(mode string) {
	var files map[string]*string
	said := []string{}
	if err := json.Unmarshal([]byte(os.Getenv(wsWriteEnv)), &files); err != nil {
		said = append(said, "bad "+wsWriteEnv+": "+err.Error())
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		var err error
		if c := files[p]; c == nil {
			err = os.Remove(p)
		} else {
			if err = os.MkdirAll(filepath.Dir(p), 0o755); err == nil {
				err = os.WriteFile(p, []byte(*c), 0o644)
			}
		}
		if err != nil {
			said = append(said, "error: "+err.Error())
		} else {
			said = append(said, "wrote "+p)
		}
	}
	w := bufio.NewWriter(os.Stdout)
	out := func(lines ...string) {
		for _, l := range lines {
			w.WriteString(l + "\n")
		}
		w.Flush()
	}
	switch mode {
	case "ws-write":
		out(initLine, textLine(strings.Join(said, "; ")), resultLine)
	case "ws-write-hang":
		// What it wrote is written before it says so; then it waits for
		// the group kill (bounded, should that never come).
		out(initLine, textLine(fmt.Sprintf("pid %d tmp %s: %s", os.Getpid(), os.Getenv("TMPDIR"), strings.Join(said, "; "))))
		time.Sleep(2 * time.Minute)
	}
}

// wsState points drover's state directory (its ledger and its runs'
// workspaces, as by default) at a new temporary directory, returned.
func wsState(t *testing.T) string {
	t.Helper()
	state := t.TempDir()
	t.Setenv("XDG_STATE_HOME", state)
	t.Setenv("DROVER_DB", "")
	return state
}

// gitCmd runs git in dir and returns its output, trimmed; the test fails
// when git does.
func gitCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitRun(dir, args...)
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	return strings.TrimSpace(out)
}

// gitRun runs git in dir as the user would, with an identity, and
// returns its standard output (and, on an error, its standard error).
func gitRun(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-c", "user.name=Test", "-c", "user.email=test@example.com",
		"-c", "commit.gpgsign=false", "-c", "core.hooksPath=/dev/null"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}

// newRepo makes a git repository "proj" in a temporary directory with
// files committed on branch main, and returns its path.
func newRepo(t *testing.T, files map[string]string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := filepath.Join(t.TempDir(), "proj")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, dir, "init", "-q", "-b", "main")
	writeFiles(t, dir, files)
	gitCmd(t, dir, "add", "-A")
	gitCmd(t, dir, "commit", "-q", "-m", "first")
	return dir
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		path := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// agentWrites makes the ws-* agents of the next runs write files.
func agentWrites(t *testing.T, files map[string]any) {
	t.Helper()
	b, err := json.Marshal(files)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(wsWriteEnv, string(b))
}

var worksInRe = regexp.MustCompile(`works in (\S+) on branch (\S+)`)

// wsRun runs drover run with the ws-write agent writing files and returns
// its exit status, output and run id ("" when none was printed).
func wsRun(t *testing.T, files map[string]any, args ...string) (code int, stdout, stderr, id string) {
	t.Helper()
	agentWrites(t, files)
	code, stdout, stderr = cli(t, "ws-write", append([]string{"run"}, args...)...)
	if m := runIDRe.FindStringSubmatch(stderr); m != nil {
		id = m[1]
	}
	return code, stdout, stderr, id
}

// mustRun is wsRun that must succeed with a run id.
func mustRun(t *testing.T, files map[string]any, args ...string) (id, stderr string) {
	t.Helper()
	code, _, stderr, id := wsRun(t, files, args...)
	if code != ExitOK || id == "" {
		t.Fatalf("drover run %v: exit %d, run %q: %s", args, code, id, stderr)
	}
	return id, stderr
}

// dr runs a drover command other than run (fake agent ws-write) and
// returns its exit status and output.
func dr(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return cli(t, "ws-write", args...)
}

// changeOf is run id's change as drover diff --json says it.
func changeOf(t *testing.T, id string) store.Change {
	t.Helper()
	code, out, errOut := dr(t, "diff", "--json", id)
	if code != ExitOK {
		t.Fatalf("diff --json %s: exit %d: %s", id, code, errOut)
	}
	var c store.Change
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("diff --json %s: %v: %q", id, err, out)
	}
	return c
}

// paths are the paths of c's files.
func paths(c store.Change) []string {
	var ps []string
	for _, f := range c.Files {
		ps = append(ps, f.Path)
	}
	sort.Strings(ps)
	return ps
}

// ledgerRuns are the runs drover ps --all --json lists.
func ledgerRuns(t *testing.T) []store.Run {
	t.Helper()
	code, out, errOut := dr(t, "ps", "--all", "--json")
	if code != ExitOK {
		t.Fatalf("ps --all --json: exit %d: %s", code, errOut)
	}
	var rs []store.Run
	for l := range strings.Lines(out) {
		var r store.Run
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("ps line %q: %v", l, err)
		}
		rs = append(rs, r)
	}
	return rs
}

// branch is the commit refs/heads/name is at in repo, "" when there is no
// such branch.
func branch(t *testing.T, repo, name string) string {
	t.Helper()
	out, err := gitRun(repo, "rev-parse", "--verify", "--quiet", "refs/heads/"+name)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(out)
}

// droverBranches are the drover/* branches of repo.
func droverBranches(t *testing.T, repo string) []string {
	t.Helper()
	out := gitCmd(t, repo, "for-each-ref", "--format=%(refname:short)", "refs/heads/drover/")
	return strings.Fields(out)
}

// exists says whether path exists.
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// oneLineError asserts that a refused command said why in one line (and
// at most drover's usage hint after it) containing want.
func oneLineError(t *testing.T, what, stderr, want string) {
	t.Helper()
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if len(lines) > 1 && lines[len(lines)-1] == "Run 'drover --help' for usage." {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != 1 || !strings.HasPrefix(lines[0], "drover: ") || !strings.Contains(lines[0], want) {
		t.Errorf("%s: stderr is not one line saying %q: %q", what, want, stderr)
	}
}

// TestWS1_RefusedWorktreeRunsLeaveNoTrace: drover run --worktree where
// no workspace can be made — outside a git repository, in one with no
// commit, without git on PATH, from a --base that names no commit,
// --include-dirty from a --base other than HEAD, queued — and --base,
// --include-dirty or --check without --worktree are refused in one line
// with exit status 2, before anything is made: no run in the ledger, no
// branch in the repository, nothing new in drover's state directory (no
// workspace, no configuration home of --isolate), no fakemodel started.
func TestWS1_RefusedWorktreeRunsLeaveNoTrace(t *testing.T) {
	state := wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	writeFiles(t, repo, map[string]string{"second.txt": "2\n"})
	gitCmd(t, repo, "add", "-A")
	gitCmd(t, repo, "commit", "-q", "-m", "second")
	writeFiles(t, repo, map[string]string{"README.md": "hello, uncommitted\n"})
	noCommit := filepath.Join(t.TempDir(), "fresh")
	if err := os.Mkdir(noCommit, 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, noCommit, "init", "-q")
	notRepo := t.TempDir()

	cases := []struct {
		name  string
		args  []string
		want  string
		noGit bool
	}{
		{"outside a repository", []string{"--worktree", "--cwd", notRepo}, "not in a git repository", false},
		{"outside a repository, isolated", []string{"--worktree", "--isolate", "--cwd", notRepo}, "not in a git repository", false},
		{"outside a repository, offline", []string{"--worktree", "--fakemodel", "--cwd", notRepo}, "not in a git repository", false},
		{"no commit", []string{"--worktree", "--cwd", noCommit}, "has no commit", false},
		{"no git", []string{"--worktree", "--cwd", repo}, "git is not on PATH", true},
		{"base names no commit", []string{"--worktree", "--base", "no-such-branch", "--cwd", repo}, "no-such-branch names no commit", false},
		{"include-dirty off HEAD", []string{"--worktree", "--base", "HEAD~1", "--include-dirty", "--cwd", repo}, "--include-dirty", false},
		{"queued", []string{"--worktree", "--queue", "--cwd", repo}, "queued run has no workspace", false},
		{"base without worktree", []string{"--base", "HEAD", "--cwd", repo}, "go with --worktree", false},
		{"include-dirty without worktree", []string{"--include-dirty", "--cwd", repo}, "go with --worktree", false},
		{"check without worktree", []string{"--check", "true", "--cwd", repo}, "go with --worktree", false},
	}
	refuse := func(t *testing.T) {
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				if c.noGit {
					// git is found on PATH; the agent is not (DROVER_CLAUDE_BIN
					// names it), so a PATH without git refuses for git alone.
					t.Setenv("PATH", t.TempDir())
				}
				before := listTree(t, state)
				code, stdout, stderr, id := wsRun(t, map[string]any{"hello.txt": "hi\n"}, append(c.args, "-a", "claude", "write hello.txt")...)
				if code != ExitUsage || stdout != "" || id != "" {
					t.Fatalf("exit %d (want 2), run %q, stdout %q, stderr %q", code, id, stdout, stderr)
				}
				oneLineError(t, c.name, stderr, c.want)
				if strings.Contains(stderr, "fakemodel at") || strings.Contains(stderr, "configuration home") {
					t.Errorf("started something before refusing: %q", stderr)
				}
				if after := listTree(t, state); !slices.Equal(after, before) {
					t.Errorf("drover's state directory changed: %q → %q", before, after)
				}
			})
		}
	}
	// In an empty state directory: no ledger is made to be left empty.
	t.Run("no ledger", refuse)
	// In a ledger with no run in it: none is recorded.
	if err := os.MkdirAll(filepath.Join(state, "drover"), 0o700); err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(context.Background(), filepath.Join(state, "drover", "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	t.Run("ledger", refuse)
	if rs := ledgerRuns(t); len(rs) != 0 {
		t.Errorf("refused runs were recorded: %+v", rs)
	}
	if bs := droverBranches(t, repo); len(bs) != 0 {
		t.Errorf("refused runs made branches: %v", bs)
	}
	if got := readFile(t, filepath.Join(repo, "README.md")); got != "hello, uncommitted\n" || exists(filepath.Join(repo, "hello.txt")) {
		t.Errorf("the user's tree changed: README.md %q", got)
	}
}

// TestWS1_WorktreeRunLeavesTheUserTreeAlone: a --worktree run works in a
// clone under $XDG_STATE_HOME/drover/worktrees/RUN on branch drover/RUN,
// which exists in the user's repository holding the agent's work; the
// user's working tree, HEAD and current branch stay as they were — the
// agent could not write there (when the kernel contains it); the
// uncommitted changes of the user's tree are named on stderr and are not
// in the workspace. Parallel runs get a workspace each.
func TestWS1_WorktreeRunLeavesTheUserTreeAlone(t *testing.T) {
	state := wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n", "src/main.go": "package main\n"})
	head := gitCmd(t, repo, "rev-parse", "HEAD")
	writeFiles(t, repo, map[string]string{"README.md": "hello, uncommitted\n", "notes.txt": "mine\n"})
	status := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all")

	writes := map[string]any{"hello.txt": "hi\n", "README.md": "rewritten by the agent\n"}
	intruder := filepath.Join(repo, "intruder.txt")
	contained := contain.Available() == nil
	if contained {
		writes[intruder] = "the agent was here\n"
	}
	id, stderr := mustRun(t, writes, "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt")

	m := worksInRe.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no workspace said on stderr: %q", stderr)
	}
	ws, br := m[1], m[2]
	if want := filepath.Join(state, "drover", "worktrees", id, "proj"); ws != want {
		t.Errorf("workspace %s, want %s", ws, want)
	}
	if br != "drover/"+id {
		t.Errorf("branch %s, want drover/%s", br, id)
	}
	if !strings.Contains(stderr, "2 uncommitted changes") || !strings.Contains(stderr, "README.md") || !strings.Contains(stderr, "notes.txt") ||
		!strings.Contains(stderr, "--include-dirty") {
		t.Errorf("the uncommitted changes are not named on stderr: %q", stderr)
	}
	// The agent's work: in the workspace, and committed on its branch in
	// the user's repository.
	if got := readFile(t, filepath.Join(ws, "hello.txt")); got != "hi\n" {
		t.Errorf("workspace hello.txt %q", got)
	}
	if exists(filepath.Join(ws, "notes.txt")) {
		t.Error("an untracked file of the user's tree is in the workspace without --include-dirty")
	}
	tip := branch(t, repo, "drover/"+id)
	if tip == "" {
		t.Fatalf("no branch drover/%s in the user's repository: %v", id, droverBranches(t, repo))
	}
	if got := gitCmd(t, repo, "show", tip+":hello.txt"); got != "hi" {
		t.Errorf("branch drover/%s: hello.txt %q", id, got)
	}
	if got := gitCmd(t, repo, "rev-parse", tip+"^"); got != head {
		t.Errorf("branch drover/%s does not start from HEAD %s: parent %s", id, head, got)
	}
	// The user's tree, as it was.
	if got := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all"); got != status {
		t.Errorf("git status of the user's tree: %q, was %q", got, status)
	}
	if got := readFile(t, filepath.Join(repo, "README.md")); got != "hello, uncommitted\n" {
		t.Errorf("the user's README.md: %q", got)
	}
	if exists(filepath.Join(repo, "hello.txt")) || exists(intruder) {
		t.Error("the agent wrote in the user's tree")
	}
	if got := gitCmd(t, repo, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved: %s → %s", head, got)
	}
	if got := gitCmd(t, repo, "symbolic-ref", "--short", "HEAD"); got != "main" {
		t.Errorf("the current branch is %s", got)
	}
	if contained {
		if _, show, _ := dr(t, "show", id); !strings.Contains(show, "error: open "+intruder) {
			t.Errorf("the contained agent's write to the user's tree did not fail:\n%s", show)
		}
	}

	// Parallel runs: a workspace and a branch each.
	code, _, stderr, _ := wsRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--cwd", repo, "-a", "claude", "-a", "claude", "write hello.txt")
	if code != ExitOK {
		t.Fatalf("two runs: exit %d: %s", code, stderr)
	}
	both := worksInRe.FindAllStringSubmatch(stderr, -1)
	if len(both) != 2 || both[0][1] == both[1][1] || both[0][2] == both[1][2] {
		t.Fatalf("two runs do not have a workspace and branch each: %q", stderr)
	}
	for _, m := range both {
		if got := readFile(t, filepath.Join(m[1], "hello.txt")); got != "hi\n" || branch(t, repo, m[2]) == "" {
			t.Errorf("run in %s on %s: hello.txt %q, branch %q", m[1], m[2], got, branch(t, repo, m[2]))
		}
	}
}

// TestWS1_IncludeDirtyCarriesTheUncommittedChanges: with --include-dirty
// the workspace starts from the user's tree as it is, uncommitted and
// untracked files included (not ignored ones), and the run's change is the
// agent's work alone.
func TestWS1_IncludeDirtyCarriesTheUncommittedChanges(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n", ".gitignore": "*.log\n"})
	writeFiles(t, repo, map[string]string{"README.md": "hello, uncommitted\n", "notes.txt": "mine\n", "debug.log": "noise\n"})
	status := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all")
	id, stderr := mustRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--include-dirty", "--cwd", repo, "-a", "claude", "write hello.txt")
	if strings.Contains(stderr, "uncommitted") {
		t.Errorf("--include-dirty still says changes are left behind: %q", stderr)
	}
	ws := worksInRe.FindStringSubmatch(stderr)[1]
	if got := readFile(t, filepath.Join(ws, "README.md")); got != "hello, uncommitted\n" {
		t.Errorf("workspace README.md %q: the uncommitted change was not carried", got)
	}
	if got := readFile(t, filepath.Join(ws, "notes.txt")); got != "mine\n" {
		t.Errorf("workspace notes.txt %q: the untracked file was not carried", got)
	}
	if exists(filepath.Join(ws, "debug.log")) {
		t.Error("an ignored file was carried into the workspace")
	}
	c := changeOf(t, id)
	if got := paths(c); !slices.Equal(got, []string{"hello.txt"}) || c.State != store.ChangePending {
		t.Errorf("the run's change is %v (%s), want [hello.txt] pending: the carried changes are not the agent's", got, c.State)
	}
	if strings.Contains(c.Patch, "uncommitted") || strings.Contains(c.Patch, "notes.txt") {
		t.Errorf("the patch holds the carried changes:\n%s", c.Patch)
	}
	if got := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all"); got != status {
		t.Errorf("git status of the user's tree: %q, was %q", got, status)
	}
	// The change applies to the tree it was carried from.
	if code, out, errOut := dr(t, "apply", id); code != ExitOK || readFile(t, filepath.Join(repo, "hello.txt")) != "hi\n" {
		t.Errorf("apply: exit %d: %s%s", code, out, errOut)
	}
}

// TestWS2_WorktreeRunRecordsItsChange: a --worktree run's change is
// recorded — base, files with their kind and +/−, the patch — and
// committed on its branch; drover diff says it as a patch, --stat as
// files and counts, --json as the change whole; ps has a CHANGE column
// and show change and branch lines.
func TestWS2_WorktreeRunRecordsItsChange(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n", "old.txt": "one\ntwo\nthree\n"})
	head := gitCmd(t, repo, "rev-parse", "HEAD")
	// A run outside a repository has no change: ps has no CHANGE column
	// while no run has one, diff says there is none.
	outside, _ := mustRun(t, map[string]any{}, "--cwd", t.TempDir(), "-a", "claude", "not in a repository")
	if _, ps, _ := dr(t, "ps", "--all"); strings.Contains(ps, "CHANGE") || !strings.Contains(ps, outside) {
		t.Errorf("ps with no change:\n%s", ps)
	}
	if code, _, errOut := dr(t, "diff", outside); code != ExitUsage || !strings.Contains(errOut, "worked in no git repository") {
		t.Errorf("diff of a run outside a repository: exit %d: %s", code, errOut)
	}

	id, stderr := mustRun(t, map[string]any{"hello.txt": "hi\nthere\n", "old.txt": "one\n2\nthree\n", "README.md": nil},
		"--worktree", "--cwd", repo, "-a", "claude", "write hello.txt")
	if !strings.Contains(stderr, "3 files +3 -2 pending on branch drover/"+id) || !strings.Contains(stderr, "drover diff "+id) {
		t.Errorf("the run's end does not say its change: %q", stderr)
	}

	c := changeOf(t, id)
	want := []store.ChangeFile{
		{Path: "README.md", Kind: "deleted", Removed: 1},
		{Path: "hello.txt", Kind: "added", Added: 2},
		{Path: "old.txt", Kind: "modified", Added: 1, Removed: 1},
	}
	if !slices.Equal(c.Files, want) {
		t.Errorf("files %+v, want %+v", c.Files, want)
	}
	if c.RunID != id || c.Base != head || c.Branch != "drover/"+id || c.State != store.ChangePending || c.Repo != repo || c.Commit == "" {
		t.Errorf("change %+v", c)
	}
	for _, s := range []string{"+++ b/hello.txt", "+there", "-two", "+2", "deleted file mode", "--- a/README.md"} {
		if !strings.Contains(c.Patch, s) {
			t.Errorf("the patch lacks %q:\n%s", s, c.Patch)
		}
	}
	if tip := branch(t, repo, "drover/"+id); tip != c.Commit {
		t.Errorf("branch drover/%s at %s, the change's commit %s", id, tip, c.Commit)
	}
	// The patch is the branch's commit.
	if got := gitCmd(t, repo, "diff", "--stat", head, c.Commit); !strings.Contains(got, "3 files changed, 3 insertions(+), 2 deletions(-)") {
		t.Errorf("the branch's commit: %s", got)
	}

	code, out, errOut := dr(t, "diff", id)
	if code != ExitOK || strings.TrimSpace(out) != strings.TrimSpace(c.Patch) {
		t.Errorf("diff: exit %d %s\n%s\nwant the patch\n%s", code, errOut, out, c.Patch)
	}
	code, out, errOut = dr(t, "diff", "--stat", id)
	if code != ExitOK {
		t.Fatalf("diff --stat: exit %d: %s", code, errOut)
	}
	for _, re := range []string{`(?m)^ README.md +deleted +\+0 -1$`, `(?m)^ hello.txt +added +\+2 -0$`, `(?m)^ old.txt +modified +\+1 -1$`, `(?m)^ 3 files changed, \+3 -2$`} {
		if !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("diff --stat lacks %s:\n%s", re, out)
		}
	}
	if strings.Contains(out, "@@") {
		t.Errorf("diff --stat printed the patch:\n%s", out)
	}

	_, ps, _ := dr(t, "ps", "--all")
	if !strings.Contains(ps, "CHANGE") || !regexp.MustCompile(id+`.*3 files \+3 -2 pending`).MatchString(ps) {
		t.Errorf("ps has no CHANGE of the run:\n%s", ps)
	}
	_, show, _ := dr(t, "show", id)
	for _, s := range []string{"change    3 files +3 -2 pending in " + repo + " (base " + head[:10] + ")", "branch    drover/" + id + " in " + c.Workspace} {
		if !strings.Contains(show, s) {
			t.Errorf("show lacks %q:\n%s", s, show)
		}
	}

	// A run that changed nothing says so.
	none, stderr := mustRun(t, map[string]any{}, "--worktree", "--cwd", repo, "-a", "claude", "look only")
	if !strings.Contains(stderr, "changed nothing in "+repo) {
		t.Errorf("a run that changed nothing: %q", stderr)
	}
	if c := changeOf(t, none); c.State != store.ChangeNone || len(c.Files) != 0 {
		t.Errorf("change of a run that changed nothing: %+v", c)
	}
	if _, out, _ := dr(t, "diff", none); !strings.Contains(out, "changed nothing") {
		t.Errorf("diff of a run that changed nothing: %q", out)
	}
	if code, _, errOut := dr(t, "diff", "run_nope"); code != ExitUsage || !strings.Contains(errOut, "run_nope") {
		t.Errorf("diff of no run: exit %d: %s", code, errOut)
	}
}

// TestWS2_InPlaceRunRecordsItsChange: a run without --worktree in a git
// repository records what it changed there since it started — a new
// untracked file included, an ignored one not, what was uncommitted
// before it started not — and apply and merge refuse it: it is in the
// tree already.
func TestWS2_InPlaceRunRecordsItsChange(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n", ".gitignore": "*.log\n"})
	writeFiles(t, repo, map[string]string{"before.txt": "the user's, before the run\n"})
	id, stderr := mustRun(t, map[string]any{"new.txt": "new\n", "debug.log": "ignored\n", "README.md": "hello\nagain\n"},
		"--cwd", repo, "-a", "claude", "write new.txt")
	if worksInRe.MatchString(stderr) || len(droverBranches(t, repo)) != 0 {
		t.Errorf("a run in place got a workspace or branch: %q %v", stderr, droverBranches(t, repo))
	}
	if !strings.Contains(stderr, "changed README.md, new.txt in place: drover diff "+id) {
		t.Errorf("the run's end does not say its change: %q", stderr)
	}
	c := changeOf(t, id)
	if got := paths(c); !slices.Equal(got, []string{"README.md", "new.txt"}) {
		t.Errorf("the change's files %v, want [README.md new.txt] (not the ignored debug.log, nor before.txt)", got)
	}
	if c.State != store.ChangePending || c.Branch != "" || c.Workspace != "" || c.Repo != repo {
		t.Errorf("change %+v", c)
	}
	if !strings.Contains(c.Patch, "+++ b/new.txt") || !strings.Contains(c.Patch, "+again") || strings.Contains(c.Patch, "debug.log") {
		t.Errorf("patch:\n%s", c.Patch)
	}
	for _, verb := range []string{"apply", "merge"} {
		code, out, errOut := dr(t, verb, id)
		if code != ExitUsage || out != "" {
			t.Errorf("%s of a run in place: exit %d (want 2), stdout %q", verb, code, out)
		}
		oneLineError(t, verb, errOut, "worked in place")
	}
	if got := readFile(t, filepath.Join(repo, "new.txt")); got != "new\n" {
		t.Errorf("new.txt %q", got)
	}
	if c := changeOf(t, id); c.State != store.ChangePending || len(c.Decisions) != 0 {
		t.Errorf("a refused decision was recorded: %+v", c)
	}
}

// TestWS3_ApplyWholeOrNotAtAll: apply writes a run's change into the
// user's working tree (not committed) and records the decision; a second
// apply is refused saying so; a second run's change to the same file does
// not apply — the conflict names the file and nothing is written, not
// even its files that would apply.
func TestWS3_ApplyWholeOrNotAtAll(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	head := gitCmd(t, repo, "rev-parse", "HEAD")
	first, _ := mustRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt")
	second, _ := mustRun(t, map[string]any{"hello.txt": "something else\n", "extra.txt": "extra\n"}, "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt too")

	code, out, errOut := dr(t, "apply", first)
	if code != ExitOK || !strings.Contains(out, "applied run "+first) || !strings.Contains(out, "hello.txt") {
		t.Fatalf("apply: exit %d: %s%s", code, out, errOut)
	}
	if got := readFile(t, filepath.Join(repo, "hello.txt")); got != "hi\n" {
		t.Errorf("hello.txt after apply: %q", got)
	}
	if got := gitCmd(t, repo, "rev-parse", "HEAD"); got != head {
		t.Error("apply committed")
	}
	c := changeOf(t, first)
	if c.State != store.ChangeApplied || len(c.Decisions) != 1 || c.Decisions[0].Action != store.ChangeApplied || c.Decisions[0].By == "" {
		t.Errorf("the decision is not recorded: %+v", c)
	}
	if _, show, _ := dr(t, "show", first); !strings.Contains(show, "decided   applied by ") {
		t.Errorf("show lacks the decision:\n%s", show)
	}

	code, out, errOut = dr(t, "apply", first)
	if code == ExitOK || out != "" {
		t.Errorf("second apply: exit %d, stdout %q", code, out)
	}
	oneLineError(t, "second apply", errOut, "already")

	status := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all")
	code, out, errOut = dr(t, "apply", second)
	if code == ExitOK || out != "" {
		t.Errorf("conflicting apply: exit %d, stdout %q", code, out)
	}
	oneLineError(t, "conflicting apply", errOut, "conflicts with hello.txt")
	if !strings.Contains(errOut, "nothing was changed") {
		t.Errorf("the conflict does not say nothing changed: %q", errOut)
	}
	if got := readFile(t, filepath.Join(repo, "hello.txt")); got != "hi\n" {
		t.Errorf("hello.txt after a conflicting apply: %q", got)
	}
	if exists(filepath.Join(repo, "extra.txt")) {
		t.Error("a conflicting apply wrote the part that applied: not whole or not at all")
	}
	if got := gitCmd(t, repo, "status", "--porcelain", "--untracked-files=all"); got != status {
		t.Errorf("git status after a conflicting apply: %q, was %q", got, status)
	}
	if c := changeOf(t, second); c.State != store.ChangePending || len(c.Decisions) != 0 {
		t.Errorf("a conflicting apply was recorded: %+v", c)
	}
}

// TestWS3_MergeSquashesOntoAMovedBranch: merge makes one commit on the
// user's current branch, which moved since the run started, holding the
// run's change and the branch's own work, parented on the branch's tip
// alone; --no-squash makes a merge commit with the run's branch as second
// parent; a merged change is not merged again.
func TestWS3_MergeSquashesOntoAMovedBranch(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	id, _ := mustRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt")
	other, _ := mustRun(t, map[string]any{"other.txt": "other\n"}, "--worktree", "--cwd", repo, "-a", "claude", "write other.txt")
	readme, _ := mustRun(t, map[string]any{"README.md": "hello from the agent\n"}, "--worktree", "--cwd", repo, "-a", "claude", "rewrite README.md")
	// The user goes on working on main meanwhile.
	writeFiles(t, repo, map[string]string{"mine.txt": "mine\n"})
	gitCmd(t, repo, "add", "mine.txt")
	gitCmd(t, repo, "commit", "-q", "-m", "the user's own work")
	moved := gitCmd(t, repo, "rev-parse", "HEAD")
	count := gitCmd(t, repo, "rev-list", "--count", "HEAD")

	code, out, errOut := dr(t, "merge", id)
	if code != ExitOK || !strings.Contains(out, "merged drover/"+id+" into the current branch") {
		t.Fatalf("merge: exit %d: %s%s", code, out, errOut)
	}
	if got := gitCmd(t, repo, "symbolic-ref", "--short", "HEAD"); got != "main" {
		t.Errorf("the current branch is %s", got)
	}
	if got := gitCmd(t, repo, "rev-list", "--count", "HEAD"); got != fmt.Sprint(atoi(t, count)+1) {
		t.Errorf("%s commits on main after the merge, were %s: want one more", got, count)
	}
	if got := gitCmd(t, repo, "rev-list", "--parents", "-n", "1", "HEAD"); len(strings.Fields(got)) != 2 || strings.Fields(got)[1] != moved {
		t.Errorf("the squashed commit's parents: %s, want %s alone", got, moved)
	}
	if got := gitCmd(t, repo, "ls-tree", "--name-only", "HEAD"); !slices.Equal(strings.Fields(got), []string{"README.md", "hello.txt", "mine.txt"}) {
		t.Errorf("the merged tree: %q", got)
	}
	if got := readFile(t, filepath.Join(repo, "hello.txt")); got != "hi\n" {
		t.Errorf("hello.txt in the working tree: %q", got)
	}
	if got := gitCmd(t, repo, "status", "--porcelain"); got != "" {
		t.Errorf("the working tree is not the merge's: %q", got)
	}
	c := changeOf(t, id)
	if c.State != store.ChangeMerged || len(c.Decisions) != 1 || c.Decisions[0].Detail != gitCmd(t, repo, "rev-parse", "HEAD") {
		t.Errorf("the merge is not recorded with its commit: %+v", c)
	}
	if !strings.Contains(out, c.Decisions[0].Detail[:10]) {
		t.Errorf("merge does not name its commit: %q", out)
	}
	code, out, errOut = dr(t, "merge", id)
	if code == ExitOK || out != "" {
		t.Errorf("second merge: exit %d %q", code, out)
	}
	oneLineError(t, "second merge", errOut, "already")

	// Local changes in the way of a merge: refused, nothing changed.
	squashed := gitCmd(t, repo, "rev-parse", "HEAD")
	writeFiles(t, repo, map[string]string{"README.md": "hello, uncommitted\n"})
	code, out, errOut = dr(t, "merge", readme)
	if code == ExitOK || out != "" {
		t.Errorf("merge over an uncommitted change: exit %d %q", code, out)
	}
	oneLineError(t, "merge over an uncommitted change", errOut, "conflicts with README.md")
	if gitCmd(t, repo, "rev-parse", "HEAD") != squashed || readFile(t, filepath.Join(repo, "README.md")) != "hello, uncommitted\n" {
		t.Error("a refused merge changed HEAD or the working tree")
	}
	gitCmd(t, repo, "checkout", "--", "README.md")
	writeFiles(t, repo, map[string]string{"other.txt": "the user's own\n"})
	code, out, errOut = dr(t, "merge", "--no-squash", other)
	if code == ExitOK || out != "" {
		t.Errorf("merge over a local change: exit %d %q", code, out)
	}
	// (The file is not named here: git's "Untracked working tree file
	// 'other.txt' would be overwritten by merge." is not recognised.)
	oneLineError(t, "merge over a local change", errOut, "nothing was changed")
	if gitCmd(t, repo, "rev-parse", "HEAD") != squashed || readFile(t, filepath.Join(repo, "other.txt")) != "the user's own\n" {
		t.Error("a refused merge changed HEAD or the working tree")
	}
	if c := changeOf(t, other); c.State != store.ChangePending {
		t.Errorf("a refused merge was recorded: %+v", c)
	}
	if err := os.Remove(filepath.Join(repo, "other.txt")); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := dr(t, "merge", "--no-squash", other); code != ExitOK {
		t.Fatalf("merge --no-squash: exit %d: %s%s", code, out, errOut)
	}
	want := squashed + " " + branch(t, repo, "drover/"+other)
	if got := gitCmd(t, repo, "rev-list", "--parents", "-n", "1", "HEAD"); !strings.HasSuffix(got, " "+want) {
		t.Errorf("the merge commit's parents: %s, want %s", got, want)
	}
	if got := readFile(t, filepath.Join(repo, "other.txt")); got != "other\n" {
		t.Errorf("other.txt: %q", got)
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWS3_DiscardRemovesWorkspaceAndBranch: discard removes the run's
// workspace and branch and records the decision; a second discard, and
// an apply after it, are refused.
func TestWS3_DiscardRemovesWorkspaceAndBranch(t *testing.T) {
	state := wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	id, stderr := mustRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt")
	ws := worksInRe.FindStringSubmatch(stderr)[1]
	if !exists(ws) || branch(t, repo, "drover/"+id) == "" {
		t.Fatal("no workspace or branch to discard")
	}
	code, out, errOut := dr(t, "discard", id)
	if code != ExitOK || !strings.Contains(out, "discarded run "+id) {
		t.Fatalf("discard: exit %d: %s%s", code, out, errOut)
	}
	if exists(filepath.Join(state, "drover", "worktrees", id)) {
		t.Errorf("the workspace %s is still there", ws)
	}
	if b := branch(t, repo, "drover/"+id); b != "" {
		t.Errorf("branch drover/%s is still there", id)
	}
	c := changeOf(t, id)
	if c.State != store.ChangeDiscarded || c.Workspace != "" || len(c.Decisions) != 1 || c.Decisions[0].Action != store.ChangeDiscarded {
		t.Errorf("the discard is not recorded: %+v", c)
	}
	if len(c.Files) != 1 || c.Patch == "" {
		t.Errorf("the discarded change is no longer in the ledger: %+v", c)
	}
	for _, verb := range []string{"discard", "apply", "merge"} {
		code, out, errOut := dr(t, verb, id)
		if code == ExitOK || out != "" {
			t.Errorf("%s after discard: exit %d %q", verb, code, out)
		}
		oneLineError(t, verb+" after discard", errOut, "discarded already")
	}
	if exists(filepath.Join(repo, "hello.txt")) {
		t.Error("a refused apply wrote the change")
	}
	if code, _, errOut := dr(t, "revise", id, "once more"); code != ExitUsage || !strings.Contains(errOut, "workspace is gone") {
		t.Errorf("revise after discard: exit %d: %s", code, errOut)
	}
	if n := len(ledgerRuns(t)); n != 1 {
		t.Errorf("a refused revise recorded a run: %d runs", n)
	}
}

var continuesRe = regexp.MustCompile(`run (run_[0-9a-f]+) continues run (run_[0-9a-f]+) in (\S+)`)

// TestWS3_ReviseContinuesInTheWorkspace: revise starts a new run of the
// agent in the first run's session and workspace; its change includes
// the first's and its own, on the same branch; the first's change is
// decided revised, and can no longer be applied.
func TestWS3_ReviseContinuesInTheWorkspace(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	first, stderr := mustRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt")
	ws := worksInRe.FindStringSubmatch(stderr)[1]
	firstCommit := changeOf(t, first).Commit

	agentWrites(t, map[string]any{"world.txt": "world\n"})
	code, _, stderr := dr(t, "revise", first, "add world.txt")
	if code != ExitOK {
		t.Fatalf("revise: exit %d: %s", code, stderr)
	}
	m := continuesRe.FindStringSubmatch(stderr)
	if m == nil || m[2] != first || m[3] != ws {
		t.Fatalf("revise does not say the run it started in the first's workspace %s: %q", ws, stderr)
	}
	second := m[1]
	if second == first {
		t.Fatal("revise did not start a new run")
	}
	c := changeOf(t, second)
	if got := paths(c); !slices.Equal(got, []string{"hello.txt", "world.txt"}) || c.State != store.ChangePending {
		t.Errorf("the revision's change %v (%s), want [hello.txt world.txt] pending", got, c.State)
	}
	if c.Workspace != ws || c.Branch != "drover/"+first {
		t.Errorf("the revision's workspace %s and branch %s, want %s and drover/%s", c.Workspace, c.Branch, ws, first)
	}
	if tip := branch(t, repo, "drover/"+first); tip != c.Commit || gitCmd(t, repo, "rev-parse", tip+"^") != firstCommit {
		t.Errorf("the revision is not committed on the branch after the first pass")
	}
	var runs [2]store.Run
	for _, r := range ledgerRuns(t) {
		switch r.ID {
		case first:
			runs[0] = r
		case second:
			runs[1] = r
		}
	}
	if runs[0].SessionID == "" || runs[1].SessionID != runs[0].SessionID {
		t.Errorf("the revision is not in the first run's session: %q vs %q", runs[1].SessionID, runs[0].SessionID)
	}
	fc := changeOf(t, first)
	if fc.State != store.ChangeRevised || len(fc.Decisions) != 1 || fc.Decisions[0].Detail != second {
		t.Errorf("the first change is not decided revised by %s: %+v", second, fc)
	}
	code, out, errOut := dr(t, "apply", first)
	if code == ExitOK || out != "" {
		t.Errorf("apply of a revised change: exit %d %q", code, out)
	}
	oneLineError(t, "apply of a revised change", errOut, "revised by run "+second)
	if code, _, errOut := dr(t, "revise", first, "again"); code == ExitOK || !strings.Contains(errOut, "revised") {
		t.Errorf("revise of a revised change: exit %d: %s", code, errOut)
	}
	// A revision is revised in turn, here against a model server of the
	// revise's own (--fakemodel).
	agentWrites(t, map[string]any{"more.txt": "more\n", "hello.txt": "hi, again\n"})
	code, _, stderr = dr(t, "revise", "--fakemodel", second, "add more.txt")
	m = continuesRe.FindStringSubmatch(stderr)
	if code != ExitOK || m == nil || m[2] != second || m[3] != ws || !strings.Contains(stderr, "fakemodel at") {
		t.Fatalf("revise --fakemodel: exit %d: %s", code, stderr)
	}
	third := m[1]
	if got := paths(changeOf(t, third)); !slices.Equal(got, []string{"hello.txt", "more.txt", "world.txt"}) {
		t.Errorf("the second revision's change %v", got)
	}
	if c := changeOf(t, second); c.State != store.ChangeRevised {
		t.Errorf("the first revision is %s, want revised", c.State)
	}
	// The last revision's change applies whole.
	if code, out, errOut := dr(t, "apply", third); code != ExitOK {
		t.Fatalf("apply the revision: exit %d: %s%s", code, out, errOut)
	}
	for f, want := range map[string]string{"hello.txt": "hi, again\n", "world.txt": "world\n", "more.txt": "more\n"} {
		if got := readFile(t, filepath.Join(repo, f)); got != want {
			t.Errorf("%s after applying the revisions: %q, want %q", f, got, want)
		}
	}
}

var removedRe = regexp.MustCompile(`removed the workspace and branch of run (run_[0-9a-f]+)`)

// TestWS3_GCRemovesDecidedRunsOnly: gc removes the workspaces and branches
// of the runs whose change was decided (applied) or that changed nothing,
// older than --older-than; a pending change keeps its workspace and
// branch, and can still be applied.
func TestWS3_GCRemovesDecidedRunsOnly(t *testing.T) {
	state := wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	run := func(files map[string]any) string {
		id, _ := mustRun(t, files, "--worktree", "--cwd", repo, "-a", "claude", "some work")
		return id
	}
	applied, pending, none, discarded := run(map[string]any{"a.txt": "a\n"}), run(map[string]any{"p.txt": "p\n"}), run(map[string]any{}), run(map[string]any{"d.txt": "d\n"})
	if code, _, errOut := dr(t, "apply", applied); code != ExitOK {
		t.Fatalf("apply: %s", errOut)
	}
	if code, _, errOut := dr(t, "discard", discarded); code != ExitOK {
		t.Fatalf("discard: %s", errOut)
	}
	wsOf := func(id string) string { return filepath.Join(state, "drover", "worktrees", id) }
	for _, id := range []string{applied, pending, none} {
		if !exists(wsOf(id)) || branch(t, repo, "drover/"+id) == "" {
			t.Fatalf("run %s has no workspace or branch before gc", id)
		}
	}

	if code, out, errOut := dr(t, "gc"); code != ExitOK || strings.TrimSpace(out) != "nothing to remove" {
		t.Errorf("gc (7 days): exit %d: %q %s", code, out, errOut)
	}
	code, out, errOut := dr(t, "gc", "--older-than", "0s")
	if code != ExitOK {
		t.Fatalf("gc --older-than 0s: exit %d: %s", code, errOut)
	}
	var removed []string
	for _, m := range removedRe.FindAllStringSubmatch(out, -1) {
		removed = append(removed, m[1])
	}
	want := []string{applied, none}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("gc removed %v, want %v (applied, changed nothing): %q", removed, want, out)
	}
	for _, id := range want {
		if exists(wsOf(id)) || branch(t, repo, "drover/"+id) != "" {
			t.Errorf("run %s's workspace or branch is still there", id)
		}
	}
	if !exists(wsOf(pending)) || branch(t, repo, "drover/"+pending) == "" {
		t.Fatalf("gc removed the workspace or branch of pending run %s", pending)
	}
	if code, out, _ := dr(t, "gc", "--older-than", "0s"); code != ExitOK || strings.TrimSpace(out) != "nothing to remove" {
		t.Errorf("a second gc: exit %d: %q", code, out)
	}
	if code, _, errOut := dr(t, "gc", "--older-than", "soon"); code != ExitUsage || !strings.Contains(errOut, "not an age") {
		t.Errorf("gc --older-than soon: exit %d: %s", code, errOut)
	}
	if code, _, errOut := dr(t, "apply", pending); code != ExitOK || readFile(t, filepath.Join(repo, "p.txt")) != "p\n" {
		t.Errorf("apply of the pending run after gc: exit %d: %s", code, errOut)
	}
	if c := changeOf(t, applied); c.State != store.ChangeApplied || c.Workspace != "" || len(c.Files) != 1 {
		t.Errorf("gc changed the ledger's record of the applied run: %+v", c)
	}
}

var agentPidRe = regexp.MustCompile(`pid (\d+) tmp (\S*): `)

// TestWS2_KillDashNineKeepsTheChange: a drover running a --worktree run
// is killed with SIGKILL while its agent, having written its file, waits;
// the change was never read nor recorded. The next drover (same ledger,
// same state) lists the run failed, ends the agent, reads the change from
// the workspace — diff shows it, committed on the run's branch — and
// applies it.
func TestWS2_KillDashNineKeepsTheChange(t *testing.T) {
	state := wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	bin := buildDrover(t)
	db := filepath.Join(state, "drover", "drover.db") // where drover keeps it by default
	agentWrites(t, map[string]any{"hello.txt": "hi\n"})
	cmd, sc, stderr, _ := startDrover(t, bin, db, "ws-write-hang", "run", "--json", "--worktree", "--cwd", repo, "-a", "claude", "write hello.txt, then wait")
	agentPid := 0
	for agentPid == 0 && sc.Scan() {
		if m := agentPidRe.FindStringSubmatch(sc.Text()); m != nil {
			agentPid = atoi(t, m[1])
			if strings.HasPrefix(filepath.Base(m[2]), "drover-run-") {
				// The contained run's TMPDIR, which the killed drover
				// cannot remove.
				t.Cleanup(func() { os.RemoveAll(m[2]) })
			}
		}
	}
	if agentPid == 0 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the agent never said it wrote its file; stderr %q", stderr.String())
	}
	t.Cleanup(func() { syscall.Kill(agentPid, syscall.SIGKILL) })
	m := runIDRe.FindStringSubmatch(stderr.String())
	if m == nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("no run said: %q", stderr.String())
	}
	// While it works, its change is not read, nor decided.
	if code, out, errOut := dr(t, "diff", m[1]); code != ExitOK || !strings.Contains(out, "still working") {
		t.Errorf("diff of a working run: exit %d: %q %s", code, out, errOut)
	}
	if code, _, errOut := dr(t, "apply", m[1]); code == ExitOK || !strings.Contains(errOut, "still working") {
		t.Errorf("apply of a working run: exit %d: %s", code, errOut)
	}
	cmd.Process.Kill()
	cmd.Wait()
	ws := worksInRe.FindStringSubmatch(stderr.String())
	if m == nil || ws == nil {
		t.Fatalf("no run or workspace said: %q", stderr.String())
	}
	id := m[1]
	if got := readFile(t, filepath.Join(ws[1], "hello.txt")); got != "hi\n" {
		t.Fatalf("the agent's file in the workspace: %q", got)
	}
	// The killed drover recorded the change open, never read.
	st, err := sqlite.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	c, err := st.GetChange(context.Background(), id)
	st.Close()
	if err != nil || c.State != store.ChangeOpen || len(c.Files) != 0 || c.Commit != "" {
		t.Fatalf("the killed drover's record of the change: %+v %v", c, err)
	}

	// Another drover, on the same ledger and state.
	var found *store.Run
	for _, r := range ledgerRuns(t) {
		if r.ID == id {
			found = &r
		}
	}
	if found == nil || found.Status != store.StatusFailed || found.Error != store.ReasonEngineRestart {
		t.Fatalf("the run after restart: %+v", found)
	}
	deadline := time.Now().Add(10 * time.Second)
	for syscall.Kill(agentPid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the agent %d survived the restart", agentPid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, out, errOut := dr(t, "diff", id)
	if code != ExitOK || !strings.Contains(out, "+++ b/hello.txt") || !strings.Contains(out, "+hi") {
		t.Fatalf("diff after restart: exit %d: %s\n%s", code, errOut, out)
	}
	if _, out, _ := dr(t, "diff", "--stat", id); !regexp.MustCompile(`(?m)^ hello.txt +added +\+1 -0\n 1 file changed, \+1 -0$`).MatchString(out) {
		t.Errorf("diff --stat after restart:\n%s", out)
	}
	c2 := changeOf(t, id)
	if c2.State != store.ChangePending || !slices.Equal(paths(c2), []string{"hello.txt"}) || c2.Commit == "" || branch(t, repo, "drover/"+id) != c2.Commit {
		t.Errorf("the change read after restart: %+v", c2)
	}
	if code, out, errOut := dr(t, "apply", id); code != ExitOK || !strings.Contains(out, "applied") {
		t.Fatalf("apply after restart: exit %d: %s%s", code, out, errOut)
	}
	if got := readFile(t, filepath.Join(repo, "hello.txt")); got != "hi\n" {
		t.Errorf("hello.txt after apply: %q", got)
	}
}

// compareRow is the line of drover compare's table that starts with id.
func compareRow(t *testing.T, out, id string) string {
	t.Helper()
	for l := range strings.Lines(out) {
		if strings.HasPrefix(l, id+" ") {
			return strings.TrimSpace(l)
		}
	}
	t.Fatalf("no row of %s in:\n%s", id, out)
	return ""
}

// TestWS4_CompareRunsSideBySide: compare prints a row per run, in the
// order named — status, files, +/−, cost, duration, the check's result,
// the change's state — and the tail of each failing check's output;
// --json says the same. Parallel --worktree runs end with that table.
func TestWS4_CompareRunsSideBySide(t *testing.T) {
	wsState(t)
	repo := newRepo(t, map[string]string{"README.md": "hello\n"})
	const check = `echo "checking $(ls | tr '\n' ' ')"; test -f hello.txt || { echo "hello.txt is missing"; exit 3; }`
	passes, stderr := mustRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--check", check, "--cwd", repo, "-a", "claude", "write hello.txt")
	if !strings.Contains(stderr, "passed") {
		t.Errorf("the run does not say its check passed: %q", stderr)
	}
	fails, stderr := mustRun(t, map[string]any{"other.txt": "a\nb\n", "README.md": nil}, "--worktree", "--check", check, "--cwd", repo, "-a", "claude", "write other.txt")
	if !strings.Contains(stderr, "failed (exit 3)") {
		t.Errorf("the run does not say its check failed: %q", stderr)
	}
	outside, _ := mustRun(t, map[string]any{}, "--cwd", t.TempDir(), "-a", "claude", "no repository")

	code, out, errOut := dr(t, "compare", passes, fails, outside)
	if code != ExitOK {
		t.Fatalf("compare: exit %d: %s", code, errOut)
	}
	lines := strings.Split(out, "\n")
	if !regexp.MustCompile(`^RUN +AGENT +STATUS +FILES +\+/- +COST +DURATION +CHECK +CHANGE$`).MatchString(lines[0]) {
		t.Errorf("compare's header: %q", lines[0])
	}
	if !strings.HasPrefix(lines[1], passes) || !strings.HasPrefix(lines[2], fails) || !strings.HasPrefix(lines[3], outside) {
		t.Errorf("compare's rows are not in the order named:\n%s", out)
	}
	for _, c := range []struct{ id, re string }{
		{passes, `^\S+ +claude-code +completed +1 +\+1 -0 +\$0\.0010 +\S+ +passed +pending$`},
		{fails, `^\S+ +claude-code +completed +2 +\+2 -1 +\$0\.0010 +\S+ +failed \(exit 3\) +pending$`},
		{outside, `^\S+ +claude-code +completed +- +- +\$0\.0010 +\S+ +- +-$`},
	} {
		if row := compareRow(t, out, c.id); !regexp.MustCompile(c.re).MatchString(row) {
			t.Errorf("row %q does not match %s", row, c.re)
		}
	}
	// The failing check's output, under its run and command.
	tail := fails + ": " + check + "\n  checking other.txt \n  hello.txt is missing\n"
	if !strings.Contains(out, tail) {
		t.Errorf("compare does not print the failing check's output %q:\n%s", tail, out)
	}
	if strings.Count(out, "\n  checking ") != 1 {
		t.Errorf("compare prints a passing check's output:\n%s", out)
	}

	code, out, errOut = dr(t, "compare", "--json", passes, fails)
	if code != ExitOK {
		t.Fatalf("compare --json: exit %d: %s", code, errOut)
	}
	var res struct {
		Rows []struct {
			Run    store.Run
			Change *store.Change
		}
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil || len(res.Rows) != 2 {
		t.Fatalf("compare --json: %v %q", err, out)
	}
	for i, want := range []bool{true, false} {
		ch := res.Rows[i].Change
		if ch == nil || ch.Check == nil || ch.Check.Passed != want || ch.Check.Command != check {
			t.Errorf("compare --json row %d: change %+v", i, ch)
		}
	}
	if ch := res.Rows[1].Change; ch != nil && ch.Check != nil && (ch.Check.ExitCode != 3 || !strings.Contains(ch.Check.Output, "hello.txt is missing")) {
		t.Errorf("the failing check: %+v", ch.Check)
	}
	if code, _, errOut := dr(t, "compare", passes, "run_nope"); code != ExitUsage || !strings.Contains(errOut, "run_nope") {
		t.Errorf("compare of no run: exit %d: %s", code, errOut)
	}

	// Parallel runs in workspaces end with the comparison.
	code, _, stderr, _ = wsRun(t, map[string]any{"hello.txt": "hi\n"}, "--worktree", "--check", "test -f hello.txt", "--cwd", repo, "-a", "claude", "-a", "claude", "write hello.txt")
	if code != ExitOK {
		t.Fatalf("two runs: exit %d: %s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^RUN +AGENT +STATUS +FILES .*CHECK +CHANGE$`).MatchString(stderr) ||
		len(regexp.MustCompile(`(?m)^run_\S+ +claude-code +completed +1 +\+1 -0 .* passed +pending$`).FindAllString(stderr, -1)) != 2 {
		t.Errorf("parallel runs do not end with their comparison:\n%s", stderr)
	}
}
