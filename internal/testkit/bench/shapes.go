//go:build linux

package bench

import (
	"fmt"
	"strings"
)

// Shape is one of the native streams the benchmarks measure: a vendor, the
// run flags that select the stream, and what a body line carries.
type Shape struct {
	// Name is how the shape is chosen (--shapes).
	Name string
	// Agent is the drover agent (`drover run -a`), and Command the
	// vendor's command name, found on PATH.
	Agent, Command string
	// Partial runs with --partial (text deltas).
	Partial bool
	// Line says what each body line is, for the report.
	Line string
	// TextChars is the mean length of a body line's text: the amount of
	// model text of the line size docs/performance.md gives for the shape (see
	// docs/performance.md).
	TextChars int
	// TargetRatio is the target for drover's lines/s as a share of
	// the pipe's.
	TargetRatio float64
	// SoloArgs is the command line that makes the fake print, without
	// drover, the lines it prints to drover in a `drover run` (for the
	// pipe floor).
	SoloArgs []string
	// Each body line is one UES event of type bodyType; wholeText says
	// the stream also has one whole text event (drover folds the deltas
	// into their message).
	bodyType  string
	wholeText bool
}

// Shapes are the benchmarked shapes, in the order they are reported.
var Shapes = []Shape{
	{Name: "claude", Agent: "claude", Command: "claude", Line: "assistant text message (stream-json)",
		TextChars: 61, TargetRatio: 0.17, SoloArgs: []string{"-p", "--input-format", "stream-json"}, bodyType: "text"},
	{Name: "gemini", Agent: "gemini", Command: "gemini", Partial: true, Line: "agent_message_chunk (ACP), --partial",
		TextChars: 100, TargetRatio: 0.14, SoloArgs: []string{"--acp"}, bodyType: "text_delta", wholeText: true},
	{Name: "codex", Agent: "codex", Command: "codex", Line: "item/completed agentMessage (app-server)",
		TextChars: 104, TargetRatio: 0.13, SoloArgs: []string{"app-server"}, bodyType: "text"},
}

// ShapeNamed returns the shape called name.
func ShapeNamed(name string) (Shape, error) {
	for _, s := range Shapes {
		if s.Name == name {
			return s, nil
		}
	}
	names := make([]string, len(Shapes))
	for i, s := range Shapes {
		names[i] = s.Name
	}
	return Shape{}, fmt.Errorf("unknown shape %q (known: %s)", name, strings.Join(names, ", "))
}

// shapeOfMode is the shape whose vendor speaks mode.
func shapeOfMode(mode string) Shape {
	vendor, _, _ := strings.Cut(mode, "-")
	s, _ := ShapeNamed(vendor)
	return s
}
