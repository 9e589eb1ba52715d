package uestest

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// FuzzSeed is one fuzz input: a native line, and the exit code and stderr
// Finish gets after it.
type FuzzSeed struct {
	Line   []byte
	Code   int
	Stderr string
}

// Fuzz fuzzes a translator, since agent output is untrusted: each input's
// line goes to a fresh translator from newTranslator, then Finish with the
// input's exit code and stderr; nothing may panic and every event must pass
// drover.ValidateEvent. The seeds are every line in testdata/*/*.jsonl with
// exit codes 0 and 1, every capture's lines with its recorded exit, and
// extra.
func Fuzz(f *testing.F, newTranslator func() runner.Translator, extra ...FuzzSeed) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.jsonl"))
	for _, file := range files {
		c := Capture{Path: strings.TrimSuffix(file, ".jsonl")}
		for _, l := range c.Lines(f) {
			f.Add(l, 0, "")
			f.Add(l, 1, "")
		}
	}
	for _, c := range Captures(f) {
		if c.Meta.Stderr == "" && (c.Meta.RC == 0 || c.Meta.RC == 1) {
			continue // seeded above
		}
		for _, l := range c.Lines(f) {
			f.Add(l, c.Meta.RC, c.Meta.Stderr)
		}
	}
	for _, s := range extra {
		f.Add(s.Line, s.Code, s.Stderr)
	}
	f.Fuzz(func(t *testing.T, line []byte, code int, stderr string) {
		tr := newTranslator()
		evs, _ := tr.Translate(line)
		final, _ := tr.Finish(runner.Exit{Code: code, StderrTail: stderr})
		for _, ev := range append(evs, final...) {
			if err := drover.ValidateEvent(ev); err != nil {
				t.Fatalf("invalid event from %q (exit %d): %v", line, code, err)
			}
		}
	})
}
