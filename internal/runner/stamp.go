package runner

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/drover-run/drover"
)

// Stamp makes the events of one run: every event carries the adapter id,
// the run's session id and a timestamp from Now. Translators embed it; tests
// give Now a fixed clock so the output is reproducible.
type Stamp struct {
	// Agent is the adapter id ("claude-code").
	Agent string
	// SessionID is drover's session id (Options.SessionID).
	SessionID string
	// Now is the clock; it must not be nil.
	Now func() time.Time
}

// Decode decodes the native line raw into l, a pointer to the vendor's line
// struct, whose type field typ points at. A line that is not a JSON object
// of that struct, or has no type, is an error; the runner skips it.
func (s Stamp) Decode(raw []byte, l any, typ *string) error {
	if err := Unmarshal(raw, l); err != nil {
		return fmt.Errorf("undecodable %s line: %w", s.Agent, err)
	}
	if *typ == "" {
		return fmt.Errorf("%s line without a type", s.Agent)
	}
	return nil
}

// Event returns a typ event with payload, stamped now.
func (s Stamp) Event(typ drover.EventType, payload any) drover.Event {
	return drover.Event{Type: typ, Agent: s.Agent, SessionID: s.SessionID, Timestamp: s.Now().UnixMilli(), Payload: payload}
}

// Init returns the init event: model, working directory cwd, and a copy of
// tools, where none is an empty list (UES-2), never null; meta is its
// metadata.
func (s Stamp) Init(model, cwd string, tools []string, meta map[string]any) drover.Event {
	tools = slices.Clone(tools)
	if tools == nil {
		tools = []string{}
	}
	ev := s.Event(drover.TypeInit, drover.InitPayload{Model: model, Cwd: cwd, Tools: tools})
	ev.Metadata = meta
	return ev
}

// SessionMeta is the metadata naming the vendor's own session id, or nil
// while the vendor has not named one.
func SessionMeta(vendorSession string) map[string]any {
	if vendorSession == "" {
		return nil
	}
	return map[string]any{"vendorSessionId": vendorSession}
}

// Extension returns the extension event "<agent>:<name>" (UES-3) whose
// payload is the native line raw, copied: the runner reuses its line buffer.
func (s Stamp) Extension(name string, raw []byte) drover.Event {
	return s.Event(drover.EventType(s.Agent+":"+name), json.RawMessage(slices.Clone(raw)))
}

// Failure returns a run-ending (not recoverable) error event with code and
// message. meta becomes its metadata, with "retryable" set from code unless
// meta already says (a vendor that knows better); a nil meta stays nil.
func (s Stamp) Failure(code drover.ErrorCode, msg string, meta map[string]any) drover.Event {
	if meta != nil {
		if _, ok := meta["retryable"]; !ok {
			meta["retryable"] = code.Retryable()
		}
	}
	ev := s.Event(drover.TypeError, drover.ErrorPayload{Code: code, Message: msg})
	ev.Metadata = meta
	return ev
}

// ToolCalls remembers each tool call from its tool_use to its tool_result:
// the tool's name and when the call started. The zero value is ready to
// use. Calls are kept after their result, so a late duplicate result still
// finds its name.
type ToolCalls struct {
	calls map[string]toolCall
}

type toolCall struct {
	name  string
	start time.Time
}

// Start records call id of tool name, started at start; a zero start means
// unknown, and the result then has no duration. Starting a known id again
// replaces it.
func (c *ToolCalls) Start(id, name string, start time.Time) {
	if c.calls == nil {
		c.calls = map[string]toolCall{}
	}
	c.calls[id] = toolCall{name: name, start: start}
}

// Record records call id of tool name whose start is unknown (a call the
// vendor reports only after the fact); its result has no duration.
func (c *ToolCalls) Record(id, name string) { c.Start(id, name, time.Time{}) }

// Known reports whether call id was started.
func (c *ToolCalls) Known(id string) bool {
	_, ok := c.calls[id]
	return ok
}

// Result returns the tool_result payload of call id ending at end: the
// call's tool name ("" for an unknown id) and its duration in milliseconds
// (absent when either time is unknown, never negative), with status and
// output as given.
func (c *ToolCalls) Result(id string, status drover.ToolStatus, output string, end time.Time) drover.ToolResultPayload {
	call := c.calls[id]
	p := drover.ToolResultPayload{ToolUseID: id, ToolName: call.name, Status: status, Output: output}
	if !call.start.IsZero() && !end.IsZero() {
		d := max(end.Sub(call.start).Milliseconds(), 0)
		p.DurationMs = &d
	}
	return p
}

// AddOptional adds *v to the optional count *dst (UES-2: an optional usage
// field is absent unless the vendor reported it). A nil v leaves *dst as it
// is; a nil *dst counts from 0. *dst gets new memory, never v's.
func AddOptional(dst **int64, v *int64) {
	if v == nil {
		return
	}
	n := *v
	if *dst != nil {
		n += **dst
	}
	*dst = &n
}
