package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// benchStore opens a new ledger with runs r0..r{runs-1} and pre-built
// events (about 300 bytes of JSON each), so the timed loop only writes.
func benchStore(b *testing.B, runs, perRun int) (*sqlite.Store, [][]store.Event) {
	b.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	evs := make([][]store.Event, runs)
	for i := range runs {
		id := fmt.Sprintf("r%d", i)
		createRuns(b, s, id)
		for seq := 1; seq <= perRun; seq++ {
			evs[i] = append(evs[i], testEvent(id, int64(seq)))
		}
	}
	return s, evs
}

// produce runs one producer per run, each calling write for its events in
// order, and reports events/s and, for the batched writer, events per
// commit. b.N is the number of events, across all runs.
func produce(b *testing.B, runs int, write func(s *sqlite.Store, evs []store.Event) error) {
	s, evs := benchStore(b, runs, (b.N+runs-1)/runs)
	before := s.Writer().Stats()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i := range runs {
		n := b.N / runs
		if i < b.N%runs {
			n++
		}
		wg.Go(func() {
			if err := write(s, evs[i][:n]); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
	if st := s.Writer().Stats(); st.Commits > before.Commits {
		b.ReportMetric(float64(st.Events-before.Events)/float64(st.Commits-before.Commits), "events/commit")
	}
}

// BenchmarkWriteThroughput compares write throughput (events/s) of the
// batched writer against one transaction per event, with concurrent
// producers, one per run (LED-1).
func BenchmarkWriteThroughput(b *testing.B) {
	ctx := context.Background()
	// Batched writer, each run keeping up to 256 events in flight (a
	// producer that persists, then notifies asynchronously).
	pipelined := func(s *sqlite.Store, evs []store.Event) error {
		w := s.Writer()
		const window = 256
		inflight := make([]<-chan error, 0, window)
		for _, ev := range evs {
			if len(inflight) == window {
				if err := <-inflight[0]; err != nil {
					return err
				}
				inflight = inflight[1:]
			}
			inflight = append(inflight, w.AppendAsync(ev))
		}
		for _, c := range inflight {
			if err := <-c; err != nil {
				return err
			}
		}
		return nil
	}
	// Batched writer, each run waiting for every event before the next
	// (runs.Supervisor's Config.Append).
	blocking := func(s *sqlite.Store, evs []store.Event) error {
		w := s.Writer()
		for _, ev := range evs {
			if err := w.Append(ctx, ev); err != nil {
				return err
			}
		}
		return nil
	}
	// Baseline: one AppendEvents transaction per event.
	txPerEvent := func(s *sqlite.Store, evs []store.Event) error {
		for i := range evs {
			if err := s.AppendEvents(ctx, evs[i:i+1]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, runs := range []int{8, 64} {
		b.Run(fmt.Sprintf("batched-pipelined/runs=%d", runs), func(b *testing.B) { produce(b, runs, pipelined) })
		b.Run(fmt.Sprintf("batched-blocking/runs=%d", runs), func(b *testing.B) { produce(b, runs, blocking) })
		b.Run(fmt.Sprintf("tx-per-event/runs=%d", runs), func(b *testing.B) { produce(b, runs, txPerEvent) })
	}
}

// BenchmarkAppendIdle is the latency of one Append (ns/op) on an idle
// writer: one producer, each event committed before the next is queued.
// The baseline is one AppendEvents call per event on the same store.
func BenchmarkAppendIdle(b *testing.B) {
	ctx := context.Background()
	b.Run("writer", func(b *testing.B) {
		s, evs := benchStore(b, 1, b.N)
		w := s.Writer()
		b.ResetTimer()
		for i := range b.N {
			if err := w.Append(ctx, evs[0][i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("tx-per-event", func(b *testing.B) {
		s, evs := benchStore(b, 1, b.N)
		b.ResetTimer()
		for i := range b.N {
			if err := s.AppendEvents(ctx, evs[0][i:i+1]); err != nil {
				b.Fatal(err)
			}
		}
	})
}
