package runs_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/metrics"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// replayAgent writes a fake `claude` that prints a long, realistic native
// stream (captured lines: init, then rounds of tool call, tool result and
// text, then the result) and returns its path and the events it yields.
func replayAgent(b *testing.B, rounds int) (string, int) {
	b.Helper()
	src, err := os.ReadFile("../adapter/claude/testdata/2.1.330/bash.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	var lines []string
	sc := bufio.NewScanner(bytesReader(src))
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	// bash.jsonl: init, tool_use, tool_result, text, result.
	dir := b.TempDir()
	stream := filepath.Join(dir, "stream.jsonl")
	f, err := os.Create(stream)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, lines[0])
	for range rounds {
		for _, l := range lines[1:4] {
			fmt.Fprintln(w, l)
		}
	}
	fmt.Fprintln(w, lines[4])
	w.Flush()
	f.Close()
	script := filepath.Join(dir, "claude")
	os.WriteFile(script, []byte("#!/bin/sh\nexec cat "+stream+"\n"), 0o755)
	return script, 1 + 3*rounds + 1
}

func bytesReader(b []byte) *os.File {
	r, w, _ := os.Pipe()
	go func() { w.Write(b); w.Close() }()
	return r
}

const rounds = 3000

// BenchmarkEventPath is the baseline: a native Claude stream through the
// real adapter (process, line reader, translator) and the engine.
func BenchmarkEventPath(b *testing.B) {
	bin, n := replayAgent(b, rounds)
	reg := drover.NewRegistry()
	reg.Register(claude.New())
	eng := engine.New(reg)
	b.ResetTimer()
	for b.Loop() {
		events, _ := eng.Run(context.Background(), "claude-code", "p", drover.Options{Binary: bin})
		got := 0
		for range events {
			got++
		}
		if got != n {
			b.Fatalf("%d events, want %d", got, n)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
}

// BenchmarkEventPathRecorded is the same stream through the supervisor with
// every event recorded in a SQLite ledger file (batched writer), measured
// until the run is durably finished.
func BenchmarkEventPathRecorded(b *testing.B) { benchRecorded(b, runs.Config{}) }

// BenchmarkEventPathObserved is BenchmarkEventPathRecorded with the
// Prometheus metrics observing the run (OBS-2): what they cost the event
// path (a commit time and an event counted per event).
func BenchmarkEventPathObserved(b *testing.B) {
	benchRecorded(b, runs.Config{Observer: metrics.New(nil)})
}

func benchRecorded(b *testing.B, cfg runs.Config) {
	bin, n := replayAgent(b, rounds)
	st := openStoreB(b, filepath.Join(b.TempDir(), "drover.db"))
	reg := drover.NewRegistry()
	reg.Register(claude.New())
	sup, err := runs.New(context.Background(), engine.New(reg), st, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer sup.Close()
	b.ResetTimer()
	for b.Loop() {
		started, err := sup.Start(context.Background(), runs.StartRequest{Agent: "claude-code", Prompt: "p", Options: drover.Options{Binary: bin}})
		if err != nil {
			b.Fatal(err)
		}
		rs, err := sup.Await(context.Background(), started.RunID)
		if err != nil || rs[0].Status != store.StatusCompleted || rs[0].LastSeq != int64(n) {
			b.Fatalf("run %+v %v", rs, err)
		}
	}
	b.ReportMetric(float64(b.N*n)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/event")
	if w, ok := st.(interface{ Writer() *sqliteWriter }); ok {
		if ws := w.Writer().Stats(); ws.Commits > 0 {
			b.ReportMetric(float64(ws.Events)/float64(ws.Commits), "events/commit")
		}
	}
}
