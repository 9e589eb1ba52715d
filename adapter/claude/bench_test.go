package claude

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// benchLines is every captured native line, the realistic mix of a run.
func benchLines(b *testing.B) ([][]byte, int64) {
	b.Helper()
	files, _ := filepath.Glob("testdata/*/*.jsonl")
	var lines [][]byte
	var size int64
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			b.Fatal(err)
		}
		for _, l := range bytes.Split(data, []byte("\n")) {
			if len(bytes.TrimSpace(l)) > 0 {
				lines = append(lines, l)
				size += int64(len(l))
			}
		}
	}
	return lines, size
}

// BenchmarkDecodeClaude measures the translator on captured lines: decode
// plus mapping to UES events.
func BenchmarkDecodeClaude(b *testing.B) {
	lines, size := benchLines(b)
	now := time.Now
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		tr := newTranslator("s", now, false)
		for _, l := range lines {
			if _, err := tr.translate(l); err != nil {
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
