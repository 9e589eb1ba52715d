// Package editortest is the editor of the tests of drover's ACP agent
// (acpagent, 'drover acp'): an ACP client that records what the agent
// shows and answers its permission questions as the test says.
package editortest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	acp "github.com/coder/acp-go-sdk"
)

// Editor is an acp.Client for tests. It records every session update and
// permission question; it answers each question with the option of the
// kind set by Answer, or, with none set, waits until the agent withdraws
// the question and then says "cancelled". It has no file system and no
// terminals: such a request is an error. Safe for concurrent use.
type Editor struct {
	mu        sync.Mutex
	changed   chan struct{} // closed and replaced at every change
	answer    acp.PermissionOptionKind
	updates   []acp.SessionUpdate
	asked     []acp.RequestPermissionRequest
	withdrawn []acp.ToolCallId
}

var _ acp.Client = (*Editor)(nil)

// New returns an editor that answers no question until told to.
func New() *Editor { return &Editor{changed: make(chan struct{})} }

// Answer sets the kind of option chosen for the questions from now on; ""
// means none: questions wait until withdrawn.
func (e *Editor) Answer(kind acp.PermissionOptionKind) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.answer = kind
}

// Take returns the updates received since the last Take and forgets them.
func (e *Editor) Take() []acp.SessionUpdate {
	e.mu.Lock()
	defer e.mu.Unlock()
	us := e.updates
	e.updates = nil
	return us
}

// Asked returns every question asked so far, oldest first.
func (e *Editor) Asked() []acp.RequestPermissionRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]acp.RequestPermissionRequest(nil), e.asked...)
}

// WaitUpdate waits until an update not yet taken matches; ctx's error if
// none does before ctx ends.
func (e *Editor) WaitUpdate(ctx context.Context, match func(acp.SessionUpdate) bool) error {
	return e.wait(ctx, func() bool {
		for _, u := range e.updates {
			if match(u) {
				return true
			}
		}
		return false
	})
}

// WaitAsked waits until n questions have been asked in all.
func (e *Editor) WaitAsked(ctx context.Context, n int) error {
	return e.wait(ctx, func() bool { return len(e.asked) >= n })
}

// WaitWithdrawn waits until n questions have been withdrawn in all and
// returns their tool call ids, oldest first.
func (e *Editor) WaitWithdrawn(ctx context.Context, n int) ([]acp.ToolCallId, error) {
	err := e.wait(ctx, func() bool { return len(e.withdrawn) >= n })
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]acp.ToolCallId(nil), e.withdrawn...), err
}

func (e *Editor) wait(ctx context.Context, done func() bool) error {
	for {
		e.mu.Lock()
		ok, ch := done(), e.changed
		e.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// changeLocked wakes the waiters.
func (e *Editor) changeLocked() {
	close(e.changed)
	e.changed = make(chan struct{})
}

// SessionUpdate records the update.
func (e *Editor) SessionUpdate(_ context.Context, n acp.SessionNotification) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.updates = append(e.updates, n.Update)
	e.changeLocked()
	return nil
}

// RequestPermission records the question and answers it (see Editor).
func (e *Editor) RequestPermission(ctx context.Context, p acp.RequestPermissionRequest) (acp.RequestPermissionResponse, error) {
	e.mu.Lock()
	e.asked = append(e.asked, p)
	e.changeLocked()
	kind := e.answer
	e.mu.Unlock()
	if kind != "" {
		for _, o := range p.Options {
			if o.Kind == kind {
				return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeSelected(o.OptionId)}, nil
			}
		}
		return acp.RequestPermissionResponse{}, fmt.Errorf("no option of kind %s", kind)
	}
	<-ctx.Done()
	e.mu.Lock()
	e.withdrawn = append(e.withdrawn, p.ToolCall.ToolCallId)
	e.changeLocked()
	e.mu.Unlock()
	return acp.RequestPermissionResponse{Outcome: acp.NewRequestPermissionOutcomeCancelled()}, nil
}

// errNoFS: drover's agents use their own tools, never the editor's.
var errNoFS = errors.New("editortest: the agent asked the editor for a file or a terminal")

// ReadTextFile fails.
func (*Editor) ReadTextFile(context.Context, acp.ReadTextFileRequest) (acp.ReadTextFileResponse, error) {
	return acp.ReadTextFileResponse{}, errNoFS
}

// WriteTextFile fails.
func (*Editor) WriteTextFile(context.Context, acp.WriteTextFileRequest) (acp.WriteTextFileResponse, error) {
	return acp.WriteTextFileResponse{}, errNoFS
}

// CreateTerminal fails.
func (*Editor) CreateTerminal(context.Context, acp.CreateTerminalRequest) (acp.CreateTerminalResponse, error) {
	return acp.CreateTerminalResponse{}, errNoFS
}

// KillTerminal fails.
func (*Editor) KillTerminal(context.Context, acp.KillTerminalRequest) (acp.KillTerminalResponse, error) {
	return acp.KillTerminalResponse{}, errNoFS
}

// TerminalOutput fails.
func (*Editor) TerminalOutput(context.Context, acp.TerminalOutputRequest) (acp.TerminalOutputResponse, error) {
	return acp.TerminalOutputResponse{}, errNoFS
}

// ReleaseTerminal fails.
func (*Editor) ReleaseTerminal(context.Context, acp.ReleaseTerminalRequest) (acp.ReleaseTerminalResponse, error) {
	return acp.ReleaseTerminalResponse{}, errNoFS
}

// WaitForTerminalExit fails.
func (*Editor) WaitForTerminalExit(context.Context, acp.WaitForTerminalExitRequest) (acp.WaitForTerminalExitResponse, error) {
	return acp.WaitForTerminalExitResponse{}, errNoFS
}

// Describe renders updates compactly, one string each, for comparisons:
// "user TEXT", "agent TEXT", "thought TEXT", `tool_call ID KIND STATUS
// "TITLE"`, "tool_call_update ID STATUS", "plan N", "config_option_update",
// "current_mode_update MODE"; any other as its JSON.
func Describe(us []acp.SessionUpdate) []string {
	text := func(c acp.ContentBlock) string {
		if c.Text != nil {
			return c.Text.Text
		}
		return "[non-text]"
	}
	var out []string
	for _, u := range us {
		switch {
		case u.UserMessageChunk != nil:
			out = append(out, "user "+text(u.UserMessageChunk.Content))
		case u.AgentMessageChunk != nil:
			out = append(out, "agent "+text(u.AgentMessageChunk.Content))
		case u.AgentThoughtChunk != nil:
			out = append(out, "thought "+text(u.AgentThoughtChunk.Content))
		case u.ToolCall != nil:
			out = append(out, fmt.Sprintf("tool_call %s %s %s %q", u.ToolCall.ToolCallId, u.ToolCall.Kind, u.ToolCall.Status, u.ToolCall.Title))
		case u.ToolCallUpdate != nil:
			st := ""
			if u.ToolCallUpdate.Status != nil {
				st = string(*u.ToolCallUpdate.Status)
			}
			out = append(out, fmt.Sprintf("tool_call_update %s %s", u.ToolCallUpdate.ToolCallId, st))
		case u.Plan != nil:
			out = append(out, fmt.Sprintf("plan %d", len(u.Plan.Entries)))
		case u.ConfigOptionUpdate != nil:
			out = append(out, "config_option_update")
		case u.CurrentModeUpdate != nil:
			out = append(out, "current_mode_update "+string(u.CurrentModeUpdate.CurrentModeId))
		default:
			b, _ := json.Marshal(u)
			out = append(out, string(b))
		}
	}
	return out
}

// AgentText is the agent's message text in us, its chunks joined.
func AgentText(us []acp.SessionUpdate) string {
	var s string
	for _, u := range us {
		if u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil {
			s += u.AgentMessageChunk.Content.Text.Text
		}
	}
	return s
}

// AgentSaid matches an agent message chunk of exactly text.
func AgentSaid(text string) func(acp.SessionUpdate) bool {
	return func(u acp.SessionUpdate) bool {
		return u.AgentMessageChunk != nil && u.AgentMessageChunk.Content.Text != nil && u.AgentMessageChunk.Content.Text.Text == text
	}
}
