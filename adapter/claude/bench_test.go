package claude

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
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

// BenchmarkTranslateAssistantText measures the line that dominates a
// long run (and scripts/bench's claude shape): an assistant message of one
// text block, as claude prints it in a conversation.
func BenchmarkTranslateAssistantText(b *testing.B) {
	line := []byte(`{"type":"assistant","message":{"content":[{"text":"` + strings.Repeat("The quick brown fox jumps over the lazy dog; ", 8) +
		`","type":"text"}],"id":"msg_0123456789abcdef01234567","model":"claude-opus-5-5","role":"assistant","stop_reason":null,"stop_sequence":null,` +
		`"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":10,"output_tokens":1},"context_management":null},` +
		`"parent_tool_use_id":null,"session_id":"6f1c2a9e-3b7d-4c21-9f0e-8a5b4c3d2e1f","uuid":"0b9d8c7e-6f5a-4b3c-2d1e-0f9a8b7c6d5e",` +
		`"timestamp":"2026-11-27T17:00:00.000Z","request_id":"req_0123456789abcdef01234567"}`)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	tr := newTranslator(runner.Stamp{Agent: ID, SessionID: "s", Now: time.Now}, false)
	for b.Loop() {
		evs, err := tr.Translate(line)
		if err != nil || len(evs) != 1 {
			b.Fatal(evs, err)
		}
	}
}
