package uestest

import (
	"maps"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/drover-run/drover"
)

// Expect is what one capture must mean once replayed, so that a golden
// regenerated from a broken translator cannot pass unnoticed. Zero fields
// are not checked, except where said.
type Expect struct {
	// Types is a subsequence the events must contain, in order.
	Types []drover.EventType
	// Status is the status of the one done; "" means there is no done.
	Status drover.DoneStatus
	// ErrCode is the code of every error event.
	ErrCode drover.ErrorCode
	// HTTP is every error event's metadata.httpStatus.
	HTTP int
	// Recoverable allows recoverable error events (warnings the run goes on
	// after); otherwise every error event must end the run.
	Recoverable bool
	// ToolState is the status of every tool_result.
	ToolState drover.ToolStatus
	// ToolName is the tool of every tool_use and tool_result.
	ToolName string
	// Rejected says Finish must report a rejected resume; when false it
	// must not.
	Rejected bool
	// Usage gives the done's input and output tokens and tool uses, and its
	// turns when Usage.Turns is set.
	Usage *drover.Usage
	// Result is the done's result.
	Result string
	// NoResumeToken says the done carries no resume token (the vendor never
	// named its session); otherwise it must carry one.
	NoResumeToken bool
}

// Semantics is a vendor's table of expectations over its captures in one
// version directory.
type Semantics struct {
	// Version names the directory: testdata/<Version>.
	Version string
	// Cases are the expectations by capture name; each needs its capture.
	Cases map[string]Expect
	// Complete requires an expectation for every capture in the directory.
	Complete bool
	// InitFirst requires the first event, when there are any, to be init.
	InitFirst bool
	// ResumeToken, when set, must match every done's resume token.
	ResumeToken *regexp.Regexp
	// Check, when set, asserts the vendor's own facts about the events of
	// case name.
	Check func(t testing.TB, name string, want Expect, evs []drover.Event)
}

// Semantics replays every case of s and checks it against its Expect, and
// the invariants of every replay: a tool_use has a description, a
// tool_result names its tool, and the done counts every tool_use.
func (r Replayer) Semantics(t *testing.T, s Semantics) {
	t.Helper()
	dir := filepath.Join("testdata", s.Version)
	if s.Complete {
		for _, c := range Captures(t) {
			if filepath.Dir(c.Path) != dir {
				continue
			}
			if _, ok := s.Cases[c.Name]; !ok {
				t.Errorf("%s: captured but has no semantic expectation", c.Path)
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s.Cases)) {
		want := s.Cases[name]
		path := filepath.Join(dir, name)
		if !exists(path + ".jsonl") {
			t.Errorf("%s: capture missing", path)
			continue
		}
		evs, rejected := r.Replay(t, Load(t, path))
		if rejected != want.Rejected {
			t.Errorf("%s: resume rejected = %v, want %v", name, rejected, want.Rejected)
		}
		if s.InitFirst && len(evs) > 0 && evs[0].Type != drover.TypeInit {
			t.Errorf("%s: first event %s, want init", name, evs[0].Type)
		}
		if !subsequence(want.Types, evs) {
			t.Errorf("%s: want subsequence %v in %v", name, want.Types, Types(evs))
		}
		dones := 0
		for _, ev := range evs {
			if ev.Type == drover.TypeDone {
				dones++
			}
			s.checkEvent(t, name, want, ev, evs)
		}
		if (want.Status != "") != (dones == 1) || dones > 1 {
			t.Errorf("%s: %d done events", name, dones)
		}
		if s.Check != nil {
			s.Check(t, name, want, evs)
		}
	}
}

// checkEvent checks one event of case name against want and the
// invariants; evs are all the case's events.
func (s Semantics) checkEvent(t testing.TB, name string, want Expect, ev drover.Event, evs []drover.Event) {
	t.Helper()
	switch p := ev.Payload.(type) {
	case drover.DonePayload:
		if p.Status != want.Status {
			t.Errorf("%s: done status %s, want %s", name, p.Status, want.Status)
		}
		switch {
		case want.NoResumeToken:
			if p.ResumeToken != "" {
				t.Errorf("%s: done resume token %q, want none", name, p.ResumeToken)
			}
		case p.ResumeToken == "" || s.ResumeToken != nil && !s.ResumeToken.MatchString(p.ResumeToken):
			t.Errorf("%s: done resume token %q", name, p.ResumeToken)
		}
		if want.Result != "" && p.Result != want.Result {
			t.Errorf("%s: result %q, want %q", name, p.Result, want.Result)
		}
		if n := count(evs, drover.TypeToolUse); p.Usage.ToolUses != int64(n) {
			t.Errorf("%s: usage.toolUses %d, saw %d tool_use", name, p.Usage.ToolUses, n)
		}
		if u := want.Usage; u != nil {
			if p.Usage.InputTokens != u.InputTokens || p.Usage.OutputTokens != u.OutputTokens || p.Usage.ToolUses != u.ToolUses ||
				(u.Turns != nil && (p.Usage.Turns == nil || *p.Usage.Turns != *u.Turns)) {
				t.Errorf("%s: usage %+v, want %+v", name, p.Usage, *u)
			}
		}
	case drover.ErrorPayload:
		if want.ErrCode != "" && p.Code != want.ErrCode {
			t.Errorf("%s: error code %s, want %s", name, p.Code, want.ErrCode)
		}
		if want.HTTP != 0 && ev.Metadata["httpStatus"] != want.HTTP {
			t.Errorf("%s: httpStatus %v, want %d", name, ev.Metadata["httpStatus"], want.HTTP)
		}
		if p.Recoverable && !want.Recoverable {
			t.Errorf("%s: run-ending error is recoverable", name)
		}
	case drover.ToolUsePayload:
		if want.ToolName != "" && p.ToolName != want.ToolName {
			t.Errorf("%s: tool %s, want %s", name, p.ToolName, want.ToolName)
		}
		if p.Description == "" {
			t.Errorf("%s: tool_use without description", name)
		}
	case drover.ToolResultPayload:
		if want.ToolState != "" && p.Status != want.ToolState {
			t.Errorf("%s: tool status %s, want %s (%q)", name, p.Status, want.ToolState, p.Output)
		}
		if p.ToolName == "" || want.ToolName != "" && p.ToolName != want.ToolName {
			t.Errorf("%s: tool_result of tool %q, want %q", name, p.ToolName, want.ToolName)
		}
	}
}

// Types lists the types of evs, for messages.
func Types(evs []drover.Event) []drover.EventType {
	out := make([]drover.EventType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

func subsequence(want []drover.EventType, evs []drover.Event) bool {
	i := 0
	for _, ev := range evs {
		if i < len(want) && ev.Type == want[i] {
			i++
		}
	}
	return i == len(want)
}

func count(evs []drover.Event, typ drover.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}
