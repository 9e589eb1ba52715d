package worker_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// echo answers its prompt at once; sleeper runs until cancelled.
func agents() []drover.Adapter {
	echo := &agenttest.Agent{Name: "echo", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		if y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "echo: " + req.Prompt}}, nil) {
			y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess}}, nil)
		}
	}}
	sleeper := &agenttest.Agent{Name: "sleeper", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		if !y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "sleeping"}}, nil) {
			return
		}
		<-ctx.Done()
	}}
	return []drover.Adapter{echo, sleeper, tickerAgent(), limitedAgent()}
}

func registry(t testing.TB) *drover.Registry {
	reg := drover.NewRegistry()
	for _, a := range agents() {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	return reg
}

func open(t testing.TB, url string) *postgres.Store {
	t.Helper()
	st, err := postgres.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// client is a supervisor that queues (as drover serve --queue does).
func client(t testing.TB, st *postgres.Store) *runs.Supervisor {
	t.Helper()
	q, err := worker.NewQueue(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	sup, err := runs.New(context.Background(), engine.New(registry(t)), st, runs.Config{Queue: q, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	return sup
}

// startWorker runs a worker on its own connection pool (as another host
// would) until the returned stop is called (or the test ends).
func startWorker(t testing.TB, url string, cfg worker.Config) (stop func()) {
	t.Helper()
	st := open(t, url)
	sup, err := runs.New(context.Background(), engine.New(registry(t)), st, runs.Config{Owner: worker.Owner(cfg.ID), Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- worker.Run(ctx, st, sup, cfg) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Error(err)
			}
			sup.Close()
		})
	}
	t.Cleanup(stop)
	return stop
}

func await(t *testing.T, sup *runs.Supervisor, ids ...string) []*store.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := sup.Await(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// TestDIST1_QueuedRunsSpreadOverWorkersByAgentAndLabel: runs a client
// queues are recorded pending with no owner, and run by the workers that
// have their agent and labels, each once.
func TestDIST1_QueuedRunsSpreadOverWorkersByAgentAndLabel(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup := client(t, st)
	ctx := context.Background()

	// Queued before any worker exists: durable in the ledger.
	var ids []string
	for range 6 {
		s, err := sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "hi"})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, s.RunID)
	}
	gpu, err := sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "gpu", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	r, err := st.GetRun(ctx, ids[0])
	if err != nil || r.Status != store.StatusPending || r.Owner != "" {
		t.Fatalf("queued run: %+v, %v; want pending with no owner", r, err)
	}
	if _, err := sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "x", Labels: []string{"Bad Label"}}); err == nil {
		t.Fatal("a bad label was queued")
	}

	startWorker(t, url, worker.Config{ID: "a", Agents: []string{"echo"}, Lease: 2 * time.Second})
	startWorker(t, url, worker.Config{ID: "b", Agents: []string{"echo"}, Labels: []string{"gpu", "eu"}, Lease: 2 * time.Second})
	rs := await(t, sup, append(ids, gpu.RunID)...)
	for _, r := range rs {
		if r.Status != store.StatusCompleted || !slices.Contains([]string{"worker:a", "worker:b"}, r.Owner) {
			t.Errorf("run %s: status %s owner %q error %q", r.ID, r.Status, r.Owner, r.Error)
		}
		evs, _ := st.Events(ctx, r.ID, 0, 0)
		if len(evs) < 2 {
			t.Errorf("run %s: %d events recorded", r.ID, len(evs))
		}
	}
	if rs[len(rs)-1].Owner != "worker:b" {
		t.Errorf("the gpu run ran on %s, which has no gpu label", rs[len(rs)-1].Owner)
	}
	ws, err := st.Workers(ctx)
	if err != nil || len(ws) != 2 {
		t.Fatalf("workers: %+v, %v", ws, err)
	}
}

// TestDIST3_CancelFromAnotherProcessReachesTheWorker: a cancel through a
// client supervisor (another process) ends a run on a worker, and a run
// cancelled while still queued ends at once, never run.
func TestDIST3_CancelFromAnotherProcessReachesTheWorker(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup := client(t, st)
	ctx := context.Background()

	queued, err := sup.Start(ctx, runs.StartRequest{Agent: "sleeper", Prompt: "never"})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Cancel(ctx, queued.RunID); err != nil {
		t.Fatal(err)
	}
	if r := await(t, sup, queued.RunID)[0]; r.Status != store.StatusFailed || r.Error != store.ReasonCancelled {
		t.Fatalf("run cancelled in the queue: %s %q", r.Status, r.Error)
	}

	startWorker(t, url, worker.Config{ID: "w", Agents: []string{"sleeper"}, Lease: 2 * time.Second})
	s, err := sup.Start(ctx, runs.StartRequest{Agent: "sleeper", Prompt: "sleep"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, st, s.RunID, store.StatusRunning)
	if err := sup.Cancel(ctx, s.RunID); err != nil {
		t.Fatal(err)
	}
	r := await(t, sup, s.RunID)[0]
	if r.Status != store.StatusFailed || r.Error != store.ReasonCancelled || r.Owner != "worker:w" {
		t.Fatalf("cancelled run: %s %q owner %q", r.Status, r.Error, r.Owner)
	}
	evs, _ := st.Events(ctx, queued.RunID, 0, 0)
	if len(evs) != 0 {
		t.Errorf("the run cancelled in the queue ran: %d events", len(evs))
	}
}

// TestDIST2_LostWorkersRunsFailWorkerLost: a worker that stops
// heartbeating (here: its heartbeats and River stop, as at kill -9) has
// its runs failed "worker lost" by another worker, and nothing is re-run.
func TestDIST2_LostWorkersRunsFailWorkerLost(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup := client(t, st)
	ctx := context.Background()

	// The doomed worker is simulated by its row and a claimed run: a
	// process killed with -9 leaves exactly that behind.
	if err := st.RegisterWorker(ctx, &postgres.Worker{ID: "doomed", Host: "elsewhere", Pid: 1, Agents: []string{"sleeper"}, Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	s, err := sup.Start(ctx, runs.StartRequest{Agent: "sleeper", Prompt: "orphan", Labels: []string{"nowhere"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(ctx, s.RunID, worker.Owner("doomed")); err != nil {
		t.Fatal(err)
	}
	// A run that asked for a retry is run again, as a new run, elsewhere.
	idem, err := sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "idempotent", Labels: []string{"gpu"}, Retries: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(ctx, idem.RunID, worker.Owner("doomed")); err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(ctx, s.RunID, worker.Owner("other")); !errors.Is(err, postgres.ErrNotClaimable) {
		t.Fatalf("second claim: %v, want ErrNotClaimable", err)
	}
	begin := time.Now()
	startWorker(t, url, worker.Config{ID: "survivor", Agents: []string{"sleeper", "echo"}, Labels: []string{"gpu"}, Lease: time.Second})
	r := await(t, sup, s.RunID)[0]
	if r.Status != store.StatusFailed || r.Error != worker.ReasonWorkerLost {
		t.Fatalf("orphaned run: %s %q", r.Status, r.Error)
	}
	ir := await(t, sup, idem.RunID)[0]
	retry, ok := strings.CutPrefix(ir.Error, worker.ReasonWorkerLost+" (retried as ")
	if ir.Status != store.StatusFailed || !ok {
		t.Fatalf("run with retries: %s %q", ir.Status, ir.Error)
	}
	retry = strings.TrimSuffix(retry, ")")
	rr := await(t, sup, retry)[0]
	if rr.Status != store.StatusCompleted || rr.Owner != worker.Owner("survivor") || rr.Prompt != "idempotent" || rr.SessionID != ir.SessionID {
		t.Fatalf("the retry: %+v", rr)
	}
	// No run asked for a retry is run again: one run with that prompt.
	all, _ := st.ListRuns(ctx, store.RunFilter{})
	n := 0
	for _, x := range all {
		if x.Prompt == "orphan" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d runs of the orphan, want 1 (no retry asked)", n)
	}
	if took := time.Since(begin); took > time.Second+10*time.Second {
		t.Errorf("failed after %s: more than lease + 10 s", took)
	}
	if err := st.Heartbeat(ctx, "doomed"); !errors.Is(err, store.ErrConflict) {
		t.Errorf("the lost worker's heartbeat: %v, want ErrConflict", err)
	}
}

func waitStatus(t *testing.T, st store.Store, id string, want store.RunStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if r, err := st.GetRun(context.Background(), id); err == nil && r.Status == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run %s never %s", id, want)
}

// tickerAgent yields a text event every 20 ms for 3 s, then done.
func tickerAgent() drover.Adapter {
	return &agenttest.Agent{Name: "ticker", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for end := time.Now().Add(3 * time.Second); time.Now().Before(end); {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if !y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "tick"}}, nil) {
				return
			}
		}
		y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess}}, nil)
	}}
}

// TestDIST1_ProtocolRunOpQueuesWithLabels: the protocol's (and HTTP's) run
// op carries labels and retries to the queue; a server that runs runs
// itself refuses them.
func TestDIST1_ProtocolRunOpQueuesWithLabels(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	ctx := context.Background()
	srv := api.NewLocal(client(t, st), api.Config{})
	res, err := srv.Run(ctx, api.RunParams{Agent: "echo", Prompt: "labelled", Labels: []string{"eu"}, Retries: 2})
	if err != nil {
		t.Fatal(err)
	}
	startWorker(t, url, worker.Config{ID: "plain", Agents: []string{"echo"}, Lease: 2 * time.Second})
	startWorker(t, url, worker.Config{ID: "eu", Agents: []string{"echo"}, Labels: []string{"eu"}, Lease: 2 * time.Second})
	sup := client(t, st)
	if r := await(t, sup, res.RunID)[0]; r.Status != store.StatusCompleted || r.Owner != worker.Owner("eu") {
		t.Fatalf("labelled run: %s on %q", r.Status, r.Owner)
	}

	local, err := runs.New(ctx, engine.New(registry(t)), st, runs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	_, err = api.NewLocal(local, api.Config{}).Run(ctx, api.RunParams{Agent: "echo", Prompt: "x", Retries: 1})
	var perr *api.Error
	if !errors.As(err, &perr) || perr.Code != api.CodeValidation {
		t.Fatalf("retries without a queue: %v, want VALIDATION", err)
	}
}

// TestDIST1_StoppingWorkerLeavesUnclaimedRunsToOthers: a run a stopping
// worker had fetched but not claimed (it was waiting for a slot) is not
// lost: another worker runs it.
func TestDIST1_StoppingWorkerLeavesUnclaimedRunsToOthers(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup := client(t, st)
	ctx := context.Background()
	// Limit 1 over two queues (no label, gpu): River fetches one job of
	// each, and the second waits for the slot.
	stopA := startWorker(t, url, worker.Config{ID: "a", Agents: []string{"sleeper"}, Labels: []string{"gpu"}, Limit: 1, Lease: 2 * time.Second})
	first, err := sup.Start(ctx, runs.StartRequest{Agent: "sleeper", Prompt: "1"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, st, first.RunID, store.StatusRunning)
	second, err := sup.Start(ctx, runs.StartRequest{Agent: "sleeper", Prompt: "2", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond) // fetched by a, waiting for its slot
	stopA()
	if r := await(t, sup, first.RunID)[0]; r.Status != store.StatusFailed || r.Error != store.ReasonCancelled {
		t.Fatalf("the stopped worker's run: %s %q", r.Status, r.Error)
	}
	if r, _ := st.GetRun(ctx, second.RunID); r.Status != store.StatusPending || r.Owner != "" {
		t.Fatalf("the unclaimed run after the stop: %s owner %q", r.Status, r.Owner)
	}
	startWorker(t, url, worker.Config{ID: "b", Agents: []string{"sleeper"}, Labels: []string{"gpu"}, Lease: 2 * time.Second})
	waitStatus(t, st, second.RunID, store.StatusRunning)
	if r, _ := st.GetRun(ctx, second.RunID); r.Owner != worker.Owner("b") {
		t.Fatalf("the unclaimed run ran on %q", r.Owner)
	}
	if err := sup.Cancel(ctx, second.RunID); err != nil {
		t.Fatal(err)
	}
	await(t, sup, second.RunID)
}

// TestDIST2_QueueingProcessReapsWithoutWorkers: with no worker alive, a
// process that queues runs (drover serve --queue) fails a dead worker's
// runs "worker lost".
func TestDIST2_QueueingProcessReapsWithoutWorkers(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	ctx := context.Background()
	q, err := worker.NewQueue(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	sup := client(t, st)
	if err := st.RegisterWorker(ctx, &postgres.Worker{ID: "gone", Host: "h", Pid: 1, Agents: []string{"sleeper"}, Lease: time.Second}); err != nil {
		t.Fatal(err)
	}
	s, err := sup.Start(ctx, runs.StartRequest{Agent: "sleeper", Prompt: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.ClaimRun(ctx, s.RunID, worker.Owner("gone")); err != nil {
		t.Fatal(err)
	}
	stop := q.Reaping(nil)
	defer stop()
	if r := await(t, sup, s.RunID)[0]; r.Status != store.StatusFailed || r.Error != worker.ReasonWorkerLost {
		t.Fatalf("run of the dead worker: %s %q", r.Status, r.Error)
	}
}

// TestDIST1_StopBeforeServingIsClean: a worker asked to stop before it
// serves (drover worker interrupted while it starts up) stops without an
// error and leaves no live registration that would later be declared
// lost.
func TestDIST1_StopBeforeServingIsClean(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup, err := runs.New(context.Background(), engine.New(registry(t)), st, runs.Config{Owner: worker.Owner("early"), Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := worker.Run(ctx, st, sup, worker.Config{ID: "early", Agents: []string{"echo"}}); err != nil {
		t.Fatalf("Run stopped before it served: %v, want nil", err)
	}
	ws, err := st.Workers(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range ws {
		if w.ID == "early" && w.StoppedAt.IsZero() {
			t.Fatalf("worker %+v registered and not stopped", w)
		}
	}
}
