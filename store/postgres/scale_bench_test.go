package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// BenchmarkEventPath8Concurrent is BenchmarkEventPathRecorded with eight
// runs at once: each iteration starts eight Claude
// streams (302 events each) and waits until all are durably finished.
func BenchmarkEventPath8Concurrent(b *testing.B) {
	bin, n := streamAgent(b, 100)
	req := runs.StartRequest{Agent: "claude-code", Prompt: "p", Options: drover.Options{Binary: bin}}
	const parallel = 8
	for _, l := range ledgers {
		b.Run(l.name, func(b *testing.B) {
			st := l.open(b)
			sup := supervise(b, st)
			b.ResetTimer()
			for b.Loop() {
				var wg sync.WaitGroup
				errs := make(chan error, parallel)
				for range parallel {
					wg.Go(func() {
						r, err := runOnce(sup, req)
						if err == nil && (r.Status != store.StatusCompleted || r.LastSeq != int64(n)) {
							err = context.Canceled
						}
						errs <- err
					})
				}
				wg.Wait()
				close(errs)
				for err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.N*parallel*n)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
