package gitws

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
)

// ErrApplied: the change is in the working tree (Apply) or the branch
// (Merge) already.
var ErrApplied = errors.New("the change is there already")

// ConflictError is a change that does not go where it was asked to: the
// files it conflicts on, and git's own words. Nothing was changed.
type ConflictError struct {
	Files  []string
	Detail string
}

// Error names the files.
func (e *ConflictError) Error() string {
	if len(e.Files) == 0 {
		return "conflict: " + e.Detail
	}
	return "conflict in " + strings.Join(e.Files, ", ")
}

// conflictFile finds the file in a line of git apply's or read-tree's
// complaints.
var conflictFile = regexp.MustCompile(`^error: (?:patch failed: (.+):\d+$|(.+): (?:already exists in working directory|does not exist in index|No such file or directory|patch does not apply|does not match index|already exists in index)$|Your local changes to the following files would be overwritten)|^error: (?:Entry|Untracked working tree file) '(.+)' (?:not uptodate|would be overwritten)|^\t(.+)$`)

// conflicts lists the files git's complaints name, once each.
func conflicts(msg string) []string {
	var files []string
	for line := range strings.SplitSeq(msg, "\n") {
		m := conflictFile.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		for _, f := range m[1:] {
			if f != "" && !slices.Contains(files, f) {
				files = append(files, f)
			}
		}
	}
	return files
}

// Apply applies patch to r's working tree, whole or not at all: when a
// part does not apply, nothing is written and the error is a
// *ConflictError naming each file; when the working tree holds the change
// already, ErrApplied. The index is left alone.
func (r *Repo) Apply(ctx context.Context, patch string) error {
	if patch == "" {
		return nil
	}
	args := []string{"apply", "--binary", "--whitespace=nowarn"}
	if _, err := gitIn(ctx, r.Root, nil, strings.NewReader(patch), append(args, "--check", "-")...); err != nil {
		if _, rev := gitIn(ctx, r.Root, nil, strings.NewReader(patch), append(args, "--check", "--reverse", "-")...); rev == nil {
			return ErrApplied
		}
		var ge *gitError
		if !errors.As(err, &ge) {
			return err
		}
		return &ConflictError{Files: conflicts(ge.msg), Detail: ge.msg}
	}
	// git apply checks every hunk before it writes any: what --check
	// passed applies whole.
	_, err := gitIn(ctx, r.Root, nil, strings.NewReader(patch), append(args, "-")...)
	return err
}

// Merge merges branch into r's current branch (or detached HEAD) as one
// commit: with squash, a commit whose only parent is HEAD; else a merge
// commit of both. It returns the commit. Nothing is half-done: conflicts
// between the branches (a *ConflictError naming each file) are found
// before anything is written, and the working tree and index are updated
// to the result only when no local change is in the way (else a
// *ConflictError naming those files, and HEAD stays). ErrApplied when
// HEAD holds the branch's tree already.
func (r *Repo) Merge(ctx context.Context, branch string, squash bool, message string, author Person) (string, error) {
	theirs, err := r.Branch(ctx, branch)
	if err != nil {
		return "", err
	}
	if theirs == "" {
		return "", fmt.Errorf("%s has no branch %s", r.Root, branch)
	}
	head, err := r.Resolve(ctx, "HEAD")
	if err != nil {
		return "", err
	}
	out, err := git(ctx, r.Root, nil, "merge-tree", "--write-tree", "--name-only", "--no-messages", head, theirs)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	var ge *gitError
	if errors.As(err, &ge) && ge.code == 1 && len(lines) > 0 {
		return "", &ConflictError{Files: lines[1:], Detail: "the branches change the same lines"}
	}
	if err != nil {
		return "", err
	}
	tree := lines[0]
	headTree, err := git(ctx, r.Root, nil, "rev-parse", head+"^{tree}")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(string(headTree)) == tree {
		return "", ErrApplied
	}
	parents := []string{head}
	if !squash {
		parents = append(parents, theirs)
	}
	commit, err := r.Commit(ctx, tree, parents, message, author)
	if err != nil {
		return "", err
	}
	// A two-tree read-tree is what checkout does: it refuses, before
	// writing, when a local change is in the way.
	if _, err := git(ctx, r.Root, nil, "read-tree", "-m", "-u", head, commit); err != nil {
		if errors.As(err, &ge) {
			return "", &ConflictError{Files: conflicts(ge.msg), Detail: ge.msg}
		}
		return "", err
	}
	if _, err := git(ctx, r.Root, nil, "update-ref", "-m", "drover merge "+branch, "HEAD", commit, head); err != nil {
		return "", fmt.Errorf("the working tree holds the merge, but HEAD moved meanwhile: %w", err)
	}
	return commit, nil
}
