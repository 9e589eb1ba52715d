package sqlite_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// The multi-process tests re-execute the test binary with childEnv set to a
// mode; TestMain sends it here instead of running tests.
const (
	childEnv    = "DROVER_SQLITE_TEST_CHILD"
	childPath   = "DROVER_SQLITE_TEST_PATH"
	childPrefix = "DROVER_SQLITE_TEST_PREFIX"
)

func childMain(mode string) int {
	ctx := context.Background()
	path, prefix := os.Getenv(childPath), os.Getenv(childPrefix)
	var err error
	switch mode {
	case "open":
		err = childOpen(ctx, path, prefix)
	case "share":
		// Open, say so, and start when the parent says go, so both
		// processes write at the same time.
		var s *sqlite.Store
		if s, err = sqlite.Open(ctx, path); err == nil {
			fmt.Println("ready")
			bufio.NewReader(os.Stdin).ReadString('\n')
			err = errors.Join(shareWork(ctx, s, prefix), s.Close())
		}
	case "decide":
		// As "share": both processes race to decide the same changes.
		var s *sqlite.Store
		if s, err = sqlite.Open(ctx, path); err == nil {
			fmt.Println("ready")
			bufio.NewReader(os.Stdin).ReadString('\n')
			err = errors.Join(decideWork(ctx, s, prefix), s.Close())
		}
	case "crash":
		err = childCrash(ctx, path)
	default:
		err = fmt.Errorf("unknown child mode %q", mode)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "child %s: %v\n", mode, err)
		return 1
	}
	return 0
}

// startChild starts the test binary as a child in mode on path.
func startChild(t *testing.T, mode, path, prefix string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, childPath+"="+path, childPrefix+"="+prefix)
	cmd.Stderr = &strings.Builder{}
	return cmd
}

// childOpen opens the ledger (racing other openers of a new file) and
// writes one run.
func childOpen(ctx context.Context, path, prefix string) error {
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	err = s.CreateRun(ctx, &store.Run{ID: prefix, Agent: "claude", Prompt: "p"})
	return errors.Join(err, s.Close())
}

const (
	shareRuns     = 3
	shareEvents   = 120 // per run: half through the Writer, half AppendEvents
	shareAdvances = 20
)

// shareWork is what each process does to a shared ledger in
// TestLED1_TwoProcesses: its own runs through their whole life (events
// from several goroutines at once), plus read-modify-writes of a session
// and a run both processes touch.
func shareWork(ctx context.Context, s *sqlite.Store, prefix string) error {
	var wg sync.WaitGroup
	errs := make(chan error, shareRuns+1)
	for i := range shareRuns {
		wg.Go(func() {
			id := fmt.Sprintf("%s-%d", prefix, i)
			if err := shareRun(ctx, s, id); err != nil {
				errs <- fmt.Errorf("%s: %w", id, err)
			}
		})
	}
	wg.Go(func() {
		for i := range shareAdvances {
			if err := s.AdvanceSession(ctx, "shared", fmt.Sprintf("%s-adv-%d", prefix, i), "tok", time.Now()); err != nil {
				errs <- fmt.Errorf("advance: %w", err)
				return
			}
			if err := s.RequestCancel(ctx, "shared"); err != nil {
				errs <- fmt.Errorf("cancel: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}

func shareRun(ctx context.Context, s *sqlite.Store, id string) error {
	if err := s.CreateRun(ctx, &store.Run{ID: id, Agent: "claude", Prompt: "p", SessionID: "shared"}); err != nil {
		return err
	}
	if err := s.StartRun(ctx, id, os.Getpid(), os.Getpid(), time.Now()); err != nil {
		return err
	}
	w := s.Writer()
	for seq := int64(1); seq <= shareEvents; seq++ {
		ev := testEvent(id, seq)
		var err error
		if seq%2 == 0 {
			err = w.Append(ctx, ev)
		} else {
			err = s.AppendEvents(ctx, []store.Event{ev})
		}
		if err != nil {
			return fmt.Errorf("seq %d: %w", seq, err)
		}
	}
	return s.FinishRun(ctx, store.Finish{RunID: id, Status: store.StatusCompleted, DoneStatus: drover.StatusSuccess,
		Messages: []store.Message{{Index: 0, Role: "user", Content: "p"}}, EndedAt: time.Now()})
}

// childCrash appends events through the batched writer until it is killed,
// printing "run seq" on stdout each time an Append has returned. Blocking
// producers make small batches; pipelined ones (AppendAsync, many events
// in flight) make large ones.
func childCrash(ctx context.Context, path string) error {
	s, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer s.Close()
	w := s.Writer()
	out := bufio.NewWriterSize(os.Stdout, 64) // flushed line by line below
	var mu sync.Mutex
	done := func(id string, seq int64) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %d\n", id, seq)
		out.Flush() // the parent must see the line before we can die
	}
	errc := make(chan error, 8)
	for i := range 6 {
		id := fmt.Sprintf("crash-%d", i)
		if err := s.CreateRun(ctx, &store.Run{ID: id, Agent: "claude", Prompt: "p"}); err != nil {
			return err
		}
		if i < 4 {
			go func() {
				for seq := int64(1); ; seq++ {
					if err := w.Append(ctx, testEvent(id, seq)); err != nil {
						errc <- err
						return
					}
					done(id, seq)
				}
			}()
			continue
		}
		pending := make(chan (<-chan error), 64)
		go func() {
			for seq := int64(1); ; seq++ {
				pending <- w.AppendAsync(testEvent(id, seq))
			}
		}()
		go func() {
			for seq := int64(1); ; seq++ {
				if err := <-<-pending; err != nil {
					errc <- err
					return
				}
				done(id, seq)
			}
		}()
	}
	return <-errc
}
