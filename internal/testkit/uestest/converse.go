package uestest

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// ConversationReplay is what a live capture recorded of a conversation
// besides the vendor's lines: what drover wrote to the vendor's stdin and
// the inputs it passed on. Each vendor decodes it from its own capture
// files; Translator replays it.
type ConversationReplay struct {
	// Written are the lines written to the vendor's stdin, in order, Open's
	// first; a trailing newline is optional unless Exact.
	Written []string
	// Exact compares each line written byte for byte, its newline
	// included; otherwise lines are compared as JSON values (whatever the
	// key order and spacing).
	Exact bool
	// Inputs are the live inputs passed on, in order.
	Inputs []Input
	// ClosedAfter, when set, is the number of the vendor's lines after
	// which stdin was closed (-1: it never was); nil leaves it unchecked.
	ClosedAfter *int
}

// SplitLines returns the lines of data each with its newline, for Written
// when Exact; a last line without one stays without.
func SplitLines(data []byte) []string {
	lines := strings.SplitAfter(string(data), "\n")
	if last := len(lines) - 1; lines[last] == "" {
		lines = lines[:last]
	}
	return lines
}

// Input is one live input passed on to the vendor.
type Input struct {
	// After is the number of the vendor's lines translated before it was
	// passed on: 0 is right after Open, before the first line.
	After int
	drover.LiveInput
}

// Translator returns a Translator, for a Replayer's New, that replays
// capture c through conv the way the runner's conversation loop drives
// it: Open first; each line translated, then Outbox; each input passed on
// with Pass once After lines are translated (after that line's Outbox),
// its event yielded (stamped with s, as the runner stamps it), then
// Outbox. It fails t when Open fails, when an input is refused, when conv
// writes anything other than r.Written in that order, and, at Finish,
// when inputs are left or lines are missing, or stdin was closed after
// another line than r.ClosedAfter.
func (r ConversationReplay) Translator(t testing.TB, c Capture, conv runner.Conversation, s runner.Stamp) runner.Translator {
	t.Helper()
	x := &conversationReplay{ConversationReplay: r, t: t, path: c.Path, conv: conv, stamp: s, closedAt: -1}
	open, err := conv.Open()
	if err != nil {
		t.Fatalf("%s: open: %v", c.Path, err)
	}
	x.write(open)
	x.pending = x.pass()
	return x
}

type conversationReplay struct {
	ConversationReplay
	t        testing.TB
	path     string
	conv     runner.Conversation
	stamp    runner.Stamp
	lines    int            // the vendor's lines translated so far
	passed   int            // inputs passed on so far
	written  int            // lines written so far
	partial  []byte         // what was written after the last newline
	closedAt int            // lines translated when stdin was closed; -1 while open
	pending  []drover.Event // events of the inputs passed on before the first line
}

var _ runner.Translator = (*conversationReplay)(nil)

func (x *conversationReplay) Translate(line []byte) ([]drover.Event, error) {
	evs := x.pending
	x.pending = nil
	out, err := x.conv.Translate(line)
	x.lines++
	x.outbox()
	evs = append(evs, out...)
	return append(evs, x.pass()...), err
}

func (x *conversationReplay) Finished() bool { return x.conv.Finished() }

func (x *conversationReplay) Finish(exit runner.Exit) ([]drover.Event, bool) {
	if len(x.partial) > 0 {
		x.line(x.partial)
	}
	if x.passed != len(x.Inputs) || x.written != len(x.Written) {
		x.t.Errorf("%s: passed %d of %d inputs on, wrote %d of %d lines", x.path, x.passed, len(x.Inputs), x.written, len(x.Written))
	}
	if x.ClosedAfter != nil && x.closedAt != *x.ClosedAfter {
		x.t.Errorf("%s: stdin closed after line %d, captured after %d", x.path, x.closedAt, *x.ClosedAfter)
	}
	evs := x.pending // a capture without lines
	final, rejected := x.conv.Finish(exit)
	return append(evs, final...), rejected
}

// pass passes on the inputs due after the lines translated so far.
func (x *conversationReplay) pass() []drover.Event {
	var evs []drover.Event
	for ; x.passed < len(x.Inputs) && x.Inputs[x.passed].After <= x.lines; x.passed++ {
		in := x.Inputs[x.passed].LiveInput
		out, err := x.conv.Pass(in)
		if err != nil {
			x.t.Errorf("%s: input %d, after line %d, refused: %v", x.path, x.passed, x.lines, err)
			continue
		}
		x.write(out)
		ev := in.Event()
		ev.Agent, ev.SessionID, ev.Timestamp = x.stamp.Agent, x.stamp.SessionID, x.stamp.Now().UnixMilli()
		evs = append(evs, ev)
		x.outbox()
	}
	return evs
}

func (x *conversationReplay) outbox() {
	out, closeInput := x.conv.Outbox()
	x.write(out)
	if closeInput && x.closedAt < 0 {
		x.closedAt = x.lines
	}
}

// write checks each whole line of out, with what was left of the last
// write before it, against the next line captured as written.
func (x *conversationReplay) write(out []byte) {
	x.partial = append(x.partial, out...)
	for {
		i := bytes.IndexByte(x.partial, '\n')
		if i < 0 {
			return
		}
		x.line(x.partial[:i+1])
		x.partial = x.partial[i+1:]
	}
}

func (x *conversationReplay) line(l []byte) {
	if x.written >= len(x.Written) {
		x.t.Errorf("%s: writes %q, more than was written", x.path, l)
		return
	}
	want := x.Written[x.written]
	x.written++
	if x.Exact && string(l) == want {
		return
	}
	var got, exp any
	if !x.Exact && json.Unmarshal(l, &got) == nil && json.Unmarshal([]byte(want), &exp) == nil && reflect.DeepEqual(got, exp) {
		return
	}
	x.t.Errorf("%s: writes %q, captured %q", x.path, l, want)
}
