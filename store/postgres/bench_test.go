package postgres_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/store/sqlite"
)

// ledgers are the stores the benchmarks compare, in one run: SQLite (the
// baseline), PostgreSQL with its batched writer, and PostgreSQL with one
// AppendEvents transaction per event (its writer hidden).
var ledgers = []struct {
	name string
	open func(b *testing.B) store.Store
}{
	{"sqlite", func(b *testing.B) store.Store {
		s, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "drover.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { s.Close() })
		return s
	}},
	{"postgres", func(b *testing.B) store.Store { return open(b, pgtest.NewDatabase(b)) }},
	{"postgres-unbatched", func(b *testing.B) store.Store { return unbatched{open(b, pgtest.NewDatabase(b))} }},
}

// unbatched is a Store without its AsyncAppender.
type unbatched struct{ store.Store }

// streamAgent writes a fake `claude` that prints a captured session with
// its tool call, result and text repeated rounds times, and returns its
// path and how many events a run of it records.
func streamAgent(b *testing.B, rounds int) (string, int) {
	src, err := os.ReadFile("../../adapter/claude/testdata/2.1.330/bash.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	// init, tool_use, tool_result, text, result.
	lines := strings.Split(strings.TrimSpace(string(src)), "\n")
	body := lines[0] + "\n" + strings.Repeat(strings.Join(lines[1:4], "\n")+"\n", rounds) + lines[4] + "\n"
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "stream"), []byte(body), 0o600); err != nil {
		b.Fatal(err)
	}
	bin := filepath.Join(dir, "claude")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec cat "+filepath.Join(dir, "stream")+"\n"), 0o755); err != nil {
		b.Fatal(err)
	}
	return bin, 3*rounds + 2
}

// BenchmarkEventPathRecorded is runs' benchmark of that name on each
// ledger: a Claude stream (302 events a run) through the real adapter,
// its process and the supervisor, every event recorded, timed until the
// run is durably finished. It reports events/s and, for PostgreSQL's
// writer, the mean batch.
func BenchmarkEventPathRecorded(b *testing.B) {
	bin, n := streamAgent(b, 100)
	req := runs.StartRequest{Agent: "claude-code", Prompt: "p", Options: drover.Options{Binary: bin}}
	for _, l := range ledgers {
		b.Run(l.name, func(b *testing.B) {
			st := l.open(b)
			sup := supervise(b, st)
			b.ResetTimer()
			for b.Loop() {
				if r, err := runOnce(sup, req); err != nil || r.Status != store.StatusCompleted || r.LastSeq != int64(n) {
					b.Fatalf("run %+v %v", r, err)
				}
			}
			b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
			if pg, ok := st.(*postgres.Store); ok && pg.WriterStats().Commits > 0 {
				ws := pg.WriterStats()
				b.ReportMetric(float64(ws.Events)/float64(ws.Commits), "events/commit")
			}
		})
	}
}

// supervise returns a supervisor of the built-in adapters recording in
// st, closed when b ends.
func supervise(b *testing.B, st store.Store) *runs.Supervisor {
	sup, err := runs.New(context.Background(), engine.New(builtin.Registry()), st, runs.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { sup.Close() })
	return sup
}

// runOnce starts a run and waits until it is recorded as ended.
func runOnce(sup *runs.Supervisor, req runs.StartRequest) (*store.Run, error) {
	started, err := sup.Start(context.Background(), req)
	if err != nil {
		return nil, err
	}
	rs, err := sup.Await(context.Background(), started.RunID)
	if err != nil {
		return nil, err
	}
	return rs[0], nil
}

// BenchmarkAppendConcurrent is the ledger alone: 16 runs each appending
// its events as fast as the ledger takes them (AppendAsync with up to 64
// in flight per run where the ledger has a writer, else one AppendEvents
// per event). b.N is the number of events.
func BenchmarkAppendConcurrent(b *testing.B) {
	const runsN, window = 16, 64
	for _, l := range ledgers {
		b.Run(l.name, func(b *testing.B) {
			st := l.open(b)
			ctx := context.Background()
			for r := range runsN {
				mkRuns(b, st, fmt.Sprint("r", r))
			}
			b.ResetTimer()
			var wg sync.WaitGroup
			for r := range runsN {
				wg.Go(func() {
					run := fmt.Sprint("r", r)
					var inflight []<-chan error
					for seq := int64(1); seq <= int64((b.N+runsN-1-r)/runsN); seq++ {
						a, ok := st.(store.AsyncAppender)
						if !ok {
							if err := st.AppendEvents(ctx, []store.Event{ev(run, seq)}); err != nil {
								b.Error(err)
								return
							}
							continue
						}
						if len(inflight) == window {
							if err := <-inflight[0]; err != nil {
								b.Error(err)
								return
							}
							inflight = inflight[1:]
						}
						inflight = append(inflight, a.AppendAsync(ev(run, seq)))
					}
					for _, c := range inflight {
						if err := <-c; err != nil {
							b.Error(err)
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
