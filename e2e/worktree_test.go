package e2e

// Runs in workspaces of their own, with the real vendor CLIs offline
// (WS-1…WS-4, docs/workspaces.md): parallel runs that each write the same
// file, reviewed and decided with drover's commands, and what a contained
// agent in a workspace cannot do to the user's tree and branches.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/store"
)

// gitRepo makes dir a repository with one commit on main and a second
// branch, and returns git's answer to show-ref: the user's refs.
func gitRepo(t *testing.T, dir string) string {
	t.Helper()
	for _, args := range [][]string{{"init", "--quiet", "--initial-branch=main"}, {"add", "--all"},
		{"commit", "--quiet", "-m", "base"}, {"branch", "other"}} {
		if args[0] == "add" {
			if err := os.WriteFile(filepath.Join(dir, "README"), []byte("the user's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		gitIn(t, dir, args...)
	}
	return gitIn(t, dir, "show-ref")
}

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-c", "user.name=u", "-c", "user.email=u@example.test"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// drover runs the built drover in the world's repository with its ledger
// and state, and returns stdout, stderr and the exit status.
func (w *containWorld) droverCmd(args ...string) (string, string, int) {
	w.t.Helper()
	cmd := exec.Command(w.drover, args...)
	cmd.Dir, cmd.Env = w.ws, append(w.env, "DROVER_DB="+w.db)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		w.t.Fatalf("drover %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

var startedRun = regexp.MustCompile(`drover: (\w+): run (run_\w+)`)

// TestWS1_ParallelWorktreesReviewedAndDecided: claude and codex in
// parallel with --worktree on a real repository, each writing hello.txt
// with its own content (its workspace's path): the user's tree is
// untouched, each run has its branch and diff; a revise of the first
// continues in its workspace and its change includes the first's; applied,
// it brings both files; the second then conflicts on hello.txt and
// changes nothing; discarded, its workspace and branch are gone.
func TestWS1_ParallelWorktreesReviewedAndDecided(t *testing.T) {
	w := newContainWorld(t, buildDrover(t), "claude")
	refs := gitRepo(t, w.ws)
	script := w.write("script.json", `{"rules":[
  {"match":"also","steps":[{"tools":[{"write":"bye.txt","content":"bye\n"}]},{"text":"wrote bye.txt"}]},
  {"match":"hello","steps":[{"tools":[{"shell":"pwd > hello.txt"}]},{"text":"wrote hello.txt"}]}]}`)
	_, stderr, code := w.droverCmd("run", "--json", "--worktree", "--tier", "autonomous", "--contain", "--fakemodel-script", script,
		"-a", "claude", "-a", "codex", "write hello.txt")
	if code != 0 {
		t.Fatalf("drover run: exit %d\n%s", code, stderr)
	}
	ids := map[string]string{}
	for _, m := range startedRun.FindAllStringSubmatch(stderr, -1) {
		ids[m[1]] = m[2]
	}
	claude, codex := ids["claude"], ids["codex"]
	if claude == "" || codex == "" {
		t.Fatalf("runs %v in\n%s", ids, stderr)
	}
	if got := gitIn(t, w.ws, "status", "--porcelain"); got != "" {
		t.Errorf("the user's tree changed: %q", got)
	}
	for _, id := range []string{claude, codex} {
		if !strings.Contains(gitIn(t, w.ws, "branch", "--list"), "drover/"+id) {
			t.Errorf("no branch drover/%s in the user's repository", id)
		}
		out, _, code := w.droverCmd("diff", "--json", id)
		var c store.Change
		if err := json.Unmarshal([]byte(out), &c); code != 0 || err != nil {
			t.Fatalf("drover diff %s: exit %d, %v: %s", id, code, err, out)
		}
		if len(c.Files) != 1 || c.Files[0].Path != "hello.txt" || c.State != store.ChangePending ||
			!strings.Contains(c.Patch, "+"+c.Workspace) {
			t.Errorf("%s's change: %+v", id, c)
		}
	}
	if !strings.Contains(stderr, "CHECK") || !strings.Contains(stderr, "FILES") || !strings.Contains(stderr, claude) || !strings.Contains(stderr, codex) {
		t.Errorf("the parallel run ends without its comparison:\n%s", stderr)
	}

	// Sent back: a second pass of claude's in its workspace.
	_, stderr, code = w.droverCmd("revise", "--json", "--fakemodel-script", script, claude, "also write bye.txt")
	m := regexp.MustCompile(`run (run_\w+) continues`).FindStringSubmatch(stderr)
	if code != 0 || m == nil {
		t.Fatalf("drover revise: exit %d\n%s", code, stderr)
	}
	revised := m[1]
	out, _, _ := w.droverCmd("diff", "--stat", revised)
	if !strings.Contains(out, "hello.txt") || !strings.Contains(out, "bye.txt") {
		t.Errorf("the revised change does not hold both passes:\n%s", out)
	}
	if out, _, _ := w.droverCmd("show", claude); !strings.Contains(out, "revised") {
		t.Errorf("the first run's change is not revised:\n%s", out)
	}

	if out, stderr, code := w.droverCmd("apply", revised); code != 0 {
		t.Fatalf("drover apply: exit %d\n%s%s", code, out, stderr)
	}
	hello, _ := os.ReadFile(filepath.Join(w.ws, "hello.txt"))
	if bye, err := os.ReadFile(filepath.Join(w.ws, "bye.txt")); !strings.Contains(string(hello), claude) || err != nil || string(bye) != "bye\n" {
		t.Errorf("after apply: hello.txt %q, bye.txt %q %v", hello, bye, err)
	}
	before := gitIn(t, w.ws, "status", "--porcelain")
	_, stderr, code = w.droverCmd("apply", codex)
	if code == 0 || !strings.Contains(stderr, "hello.txt") || !strings.Contains(stderr, "nothing was changed") {
		t.Errorf("applying the second: exit %d\n%s", code, stderr)
	}
	if got, _ := os.ReadFile(filepath.Join(w.ws, "hello.txt")); string(got) != string(hello) || gitIn(t, w.ws, "status", "--porcelain") != before {
		t.Errorf("a refused apply changed the tree: hello.txt %q", got)
	}

	out, _, _ = w.droverCmd("diff", "--json", codex)
	var c store.Change
	json.Unmarshal([]byte(out), &c)
	if _, stderr, code := w.droverCmd("discard", codex); code != 0 {
		t.Fatalf("drover discard: exit %d\n%s", code, stderr)
	}
	if _, err := os.Stat(c.Workspace); !errors.Is(err, os.ErrNotExist) || strings.Contains(gitIn(t, w.ws, "branch", "--list"), codex) {
		t.Errorf("discarded, the workspace (%v) or the branch is left", err)
	}
	if got := gitIn(t, w.ws, "show-ref", "refs/heads/main", "refs/heads/other"); !strings.Contains(refs, got) {
		t.Errorf("the user's branches moved:\n%s\nwere\n%s", got, refs)
	}
}

// TestWS1_ContainedWorktreeLeavesTheUsersTreeAndBranches: for every vendor,
// a contained agent in a workspace of its own runs shell commands that
// write into the user's own tree and move and delete the user's branches;
// the kernel refuses each (the user's refs and files are as they were),
// while its own write in the workspace is its change. In place, the same
// commands do all of it (the control).
func TestWS1_ContainedWorktreeLeavesTheUsersTreeAndBranches(t *testing.T) {
	droverBin := buildDrover(t)
	for _, agent := range []string{"claude", "codex", "gemini", "opencode"} {
		t.Run(agent, func(t *testing.T) {
			w := newContainWorld(t, droverBin, agent)
			refs := gitRepo(t, w.ws)
			escaped := filepath.Join(w.ws, "escaped.txt")
			cmds := []string{"echo mine > mine.txt", "echo out > " + escaped,
				"git -C " + w.ws + " branch -D other", "git -C " + w.ws + " -c user.name=a -c user.email=a@a commit --allow-empty -qm evil",
				"git -C " + w.ws + " branch evil"}
			script := w.write("script.json", fmt.Sprintf(`{"rules":[{"match":"write","steps":[{"tools":[{"shell":%q}]},{"text":"tried"}]}]}`,
				strings.Join(cmds, "; ")))
			_, stderr, code := w.droverCmd("run", "--json", "--worktree", "--fakemodel-script", script, "--tier", "autonomous", "--contain",
				"-a", agent, "write the files")
			m := startedRun.FindStringSubmatch(stderr)
			if code != 0 || m == nil {
				t.Fatalf("drover run: exit %d\n%s", code, stderr)
			}
			if _, err := os.Stat(escaped); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the agent wrote into the user's tree (%v)", err)
			}
			after := gitIn(t, w.ws, "show-ref")
			for _, ref := range strings.Split(refs, "\n") {
				if !strings.Contains(after, ref) {
					t.Errorf("the user's ref %q moved or went: now\n%s", ref, after)
				}
			}
			if strings.Contains(after, "evil") {
				t.Error("the agent made a branch in the user's repository")
			}
			out, _, _ := w.droverCmd("diff", "--stat", m[2])
			if !strings.Contains(out, "mine.txt") {
				t.Errorf("the agent's write in its workspace is not its change:\n%s", out)
			}

			// The control: the same commands in place.
			_, stderr, code = w.droverCmd("run", "--json", "--fakemodel-script", script, "--tier", "autonomous", "-a", agent, "write the files")
			if code != 0 {
				t.Fatalf("in place: exit %d\n%s", code, stderr)
			}
			if _, err := os.Stat(escaped); err != nil {
				t.Errorf("in place the agent could not write %s: the test proves nothing (%v)", escaped, err)
			}
			if after := gitIn(t, w.ws, "branch", "--list"); slices.Contains(strings.Fields(after), "other") || !slices.Contains(strings.Fields(after), "evil") {
				t.Errorf("in place the agent could not delete or make a branch: the test proves nothing\n%s", after)
			}
			if gitIn(t, w.ws, "log", "-1", "--format=%s") != "evil" {
				t.Error("in place the agent could not move main: the test proves nothing")
			}
		})
	}
}
