package worker_test

import (
	"context"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/worker"
)

// TestDIST2_ReturningWorkerKillsWhatItLeft: a worker declared lost while
// its run's process group lived on (a partition, a frozen host) kills that
// group when it comes back under the same id.
func TestDIST2_ReturningWorkerKillsWhatItLeft(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	ctx := context.Background()

	// What the worker's earlier life left: an agent process group still
	// running, its run failed "worker lost" by another worker.
	left := exec.Command("sleep", "60")
	left.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := left.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = left.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-left.Process.Pid, syscall.SIGKILL)
		<-exited
	})
	r := &store.Run{ID: "run_left", Agent: "echo", Prompt: "p", Owner: worker.Owner("back")}
	if err := st.CreateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := st.StartRun(ctx, r.ID, left.Process.Pid, left.Process.Pid, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := st.FinishRun(ctx, store.Finish{RunID: r.ID, Status: store.StatusFailed, Error: worker.ReasonWorkerLost,
		DoneStatus: drover.StatusError, EndedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}

	startWorker(t, url, worker.Config{ID: "back", Agents: []string{"echo"}, Lease: 2 * time.Second})
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		t.Fatal("the returning worker left its lost run's process group running")
	}
}
