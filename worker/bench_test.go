package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/worker"
)

// BenchmarkClaims3Workers is the queue's throughput: three workers, each on its own connection pool as on
// its own host, serve runs of an agent that answers at once; each
// iteration queues 30 runs through a client and waits until all are
// recorded completed. It reports runs claimed, run and recorded per second.
func BenchmarkClaims3Workers(b *testing.B) {
	url := pgtest.NewDatabase(b)
	st := open(b, url)
	sup := client(b, st)
	for _, id := range []string{"b1", "b2", "b3"} {
		startWorker(b, url, worker.Config{ID: id, Agents: []string{"echo"}, Limit: 8, Lease: 5 * time.Second})
	}
	ctx := context.Background()
	const batch = 30
	b.ResetTimer()
	for b.Loop() {
		ids := make([]string, 0, batch)
		for range batch {
			s, err := sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "x"})
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, s.RunID)
		}
		rs, err := sup.Await(ctx, ids...)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range rs {
			if r.Status != store.StatusCompleted {
				b.Fatalf("run %s: %s %q", r.ID, r.Status, r.Error)
			}
		}
	}
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "claims/s")
}
