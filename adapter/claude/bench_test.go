package claude

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/uestest"
)

// benchLines is every captured native line, the realistic mix of a run,
// and their total size.
func benchLines(b *testing.B) ([][]byte, int64) {
	b.Helper()
	var lines [][]byte
	var size int64
	for _, c := range uestest.Captures(b) {
		for _, l := range c.Lines(b) {
			lines = append(lines, l)
			size += int64(len(l))
		}
	}
	return lines, size
}

// BenchmarkDecodeClaude measures the translator on captured lines: decode
// plus mapping to UES events.
func BenchmarkDecodeClaude(b *testing.B) {
	lines, size := benchLines(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		tr := newTranslator(runner.Stamp{Agent: ID, SessionID: "s", Now: time.Now}, false)
		for _, l := range lines {
			if _, err := tr.Translate(l); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkDecodeBaselineUnmarshal is the baseline: raw json.Unmarshal of
// the same lines into a generic value.
func BenchmarkDecodeBaselineUnmarshal(b *testing.B) {
	lines, size := benchLines(b)
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, l := range lines {
			var v any
			if err := json.Unmarshal(l, &v); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.N*len(lines))/b.Elapsed().Seconds(), "lines/s")
}
