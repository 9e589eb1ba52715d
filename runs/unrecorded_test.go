package runs_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// fullLedger is a ledger on a disk that fills up: once full is set, its
// batched writer fails every event and FinishRun fails, as SQLite does
// with SQLITE_FULL.
type fullLedger struct {
	*sqlite.Store
	mu   sync.Mutex
	full bool
}

var errFull = errors.New("database or disk is full (13)")

func (l *fullLedger) fill() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.full = true
}

func (l *fullLedger) isFull() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.full
}

func (l *fullLedger) AppendAsync(ev store.Event) <-chan error {
	if l.isFull() {
		res := make(chan error, 1)
		res <- errFull
		return res
	}
	return l.Store.AppendAsync(ev)
}

func (l *fullLedger) FinishRun(ctx context.Context, f store.Finish) error {
	if l.isFull() {
		return errFull
	}
	return l.Store.FinishRun(ctx, f)
}

// TestLED7_UnwritableLedgerEndsFollowAndAwait: a run whose events and end
// the ledger cannot record (a full disk) is stopped, and its followers and
// waiters in this process are told so once it has ended: they get the
// events the ledger has, then an *UnrecordedError, rather than wait for
// an end the ledger will never show.
func TestLED7_UnwritableLedgerEndsFollowAndAwait(t *testing.T) {
	st := &fullLedger{Store: openStore(t, filepath.Join(t.TempDir(), "drover.db")).(*sqlite.Store)}
	stopped := make(chan struct{})
	var once sync.Once
	loop := &agenttest.Agent{Name: "loop", Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
		defer once.Do(func() { close(stopped) })
		for ctx.Err() == nil {
			if !y(text("again"), nil) {
				return
			}
			time.Sleep(time.Millisecond)
		}
	}}
	f := newFixtureOn(t, st, runs.Config{}, loop)
	id := f.start(t, runs.StartRequest{Agent: "loop", Prompt: "p"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	var seen int64
	var ferr error
	for ev, err := range f.sup.Follow(ctx, id, 0) {
		if err != nil {
			ferr = err
			break
		}
		if seen = ev.Seq; seen == 3 {
			st.fill()
		}
	}
	var ue *runs.UnrecordedError
	if !errors.As(ferr, &ue) || ue.RunID != id || !errors.Is(ferr, errFull) {
		t.Fatalf("follow ended with %v after seq %d, want the run's UnrecordedError", ferr, seen)
	}
	select {
	case <-stopped:
	default:
		t.Fatal("the follower was told before the agent was stopped")
	}
	r, err := f.st.GetRun(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if r.Status.Terminal() || r.LastSeq != seen {
		t.Fatalf("the ledger has %+v; the follower saw up to seq %d", r, seen)
	}
	if _, err := f.sup.Await(ctx, id); !errors.As(err, &ue) || ue.RunID != id {
		t.Fatalf("await: %v, want the run's UnrecordedError", err)
	}
}

// TestLED7_EndUnrecordedAfterEveryEvent: when only the run's end cannot be
// recorded, its follower gets every event, done included, then the
// *UnrecordedError.
func TestLED7_EndUnrecordedAfterEveryEvent(t *testing.T) {
	st := finishFails{openStore(t, filepath.Join(t.TempDir(), "drover.db")).(*sqlite.Store)}
	f := newFixtureOn(t, st, runs.Config{}, quick(2))
	id := f.start(t, runs.StartRequest{Agent: "quick", Prompt: "p"})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var types []string
	var ferr error
	for ev, err := range f.sup.Follow(ctx, id, 0) {
		if err != nil {
			ferr = err
			break
		}
		types = append(types, string(ev.Type))
	}
	var ue *runs.UnrecordedError
	if !errors.As(ferr, &ue) || strings.Join(types, ",") != "text,text,done" {
		t.Fatalf("follow: %v after %v", ferr, types)
	}
}

// finishFails is a ledger that takes every event but not a run's end.
type finishFails struct{ *sqlite.Store }

func (finishFails) FinishRun(context.Context, store.Finish) error { return errFull }

// TestLED7_ReconcileOnUnwritableLedger: reconciliation that cannot mark a
// dead drover's run failed (a full disk) logs a warning and leaves it as
// the ledger has it: the supervisor still opens, so what only reads the
// ledger works.
func TestLED7_ReconcileOnUnwritableLedger(t *testing.T) {
	st := &fullLedger{Store: openStore(t, filepath.Join(t.TempDir(), "drover.db")).(*sqlite.Store)}
	host, _ := os.Hostname()
	ctx := context.Background()
	dead := &store.Run{ID: "run_dead", Agent: "quick", Status: store.StatusPending, Owner: host + ":999999999", CreatedAt: time.Now(), SessionID: "s"}
	if err := st.CreateRun(ctx, dead); err != nil {
		t.Fatal(err)
	}
	st.fill()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	f := newFixtureOn(t, st, runs.Config{Logger: log}, quick(1))
	rs, err := f.st.ListRuns(ctx, store.RunFilter{})
	if err != nil || len(rs) != 1 || rs[0].Status != store.StatusPending {
		t.Fatalf("runs %+v %v", rs, err)
	}
	f.sup.Close() // its goroutines log no more
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "run_dead") || !strings.Contains(out, errFull.Error()) {
		t.Fatalf("no warning for the run left as it was: %q", out)
	}
}
