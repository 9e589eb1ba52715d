package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

const (
	decideChanges = 40
	decideWorkers = 4 // goroutines per process
)

// decideWork is what each process does in TestWS3_TwoProcessesDecideOnce:
// decideWorkers goroutines each try to apply every change c0, c1, … from
// pending. Losing (ErrConflict) is expected; any other error is not.
func decideWork(ctx context.Context, s *sqlite.Store, prefix string) error {
	var wg sync.WaitGroup
	errs := make(chan error, decideWorkers)
	for w := range decideWorkers {
		wg.Go(func() {
			for i := range decideChanges {
				err := s.DecideChange(ctx, fmt.Sprint("c", i),
					store.ChangeDecision{Action: store.ChangeApplied, By: fmt.Sprintf("%s-%d", prefix, w)}, store.ChangePending)
				if err != nil && !errors.Is(err, store.ErrConflict) {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// WS-3: two processes deciding the same pending changes at once: each
// change is applied exactly once, by one of them; the others' decisions
// are ErrConflict and leave nothing behind.
func TestWS3_TwoProcessesDecideOnce(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	for i := range decideChanges {
		id := fmt.Sprint("c", i)
		createRuns(t, s, id)
		if err := s.RecordChange(ctx, &store.Change{RunID: id, Repo: "/src/app", Base: "3f78", State: store.ChangePending}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := startChild(t, "decide", path, "child")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, %v\n%s", line, err, cmd.Stderr)
	}
	fmt.Fprintln(stdin, "go")
	parentErr := decideWork(ctx, s, "parent")
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v\n%s", err, cmd.Stderr)
	}
	if parentErr != nil {
		t.Errorf("parent: %v", parentErr)
	}
	if t.Failed() {
		return
	}
	cs, err := s.ListChanges(ctx, store.ChangeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != decideChanges {
		t.Fatalf("%d changes, want %d", len(cs), decideChanges)
	}
	for _, c := range cs {
		if c.State != store.ChangeApplied || len(c.Decisions) != 1 {
			t.Errorf("%s: state %s, decisions %+v; want applied once", c.RunID, c.State, c.Decisions)
		}
	}
}
