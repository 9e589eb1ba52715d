// Package acptest is drover's scripted ACP agent, for tests of the ACP
// adapter and of the agents added by configuration: a real process that
// speaks ACP on stdio (built by Build), whose prompt says what it does,
// well or badly. Not for use outside tests.
package acptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/jsonrpc"
)

// rpc writes the agent's lines.
var rpc jsonrpc.Codec

// Environment of the scripted agent.
const (
	// ModeEnv selects how it starts: "" answers everything; "mute" never
	// answers initialize; "noload" offers no session/load.
	ModeEnv = "DROVERTEST_FAKE_ACP_MODE"
	// MarkEnv, when set, names a file the agent writes "cancel" into when
	// it receives session/cancel.
	MarkEnv = "DROVERTEST_FAKE_ACP_MARK"
	// Version is what it prints for --version.
	Version = "1.2.3"
	// SessionID is the id of the sessions it starts; a session/load of
	// KnownSession succeeds, of any other id fails as unknown.
	SessionID    = "fake-session-1"
	KnownSession = "known-session"
	// KnownSessionCost is the cumulative cost (USD) of KnownSession, which
	// its session/load reports in a usage_update with the history.
	KnownSessionCost = 0.03
	// HugeLine is the length of the text of the "huge" prompt's update:
	// past drover's 64 MiB line cap.
	HugeLine = 64<<20 + 1
)

// Agent runs the scripted agent on in and out until in ends, and returns
// its exit status. The first word of a prompt picks what it does:
//
//	hello        thoughts, two messages (messageIds m1, m2), a plan; end_turn with usage
//	mystery      an update of an unknown type, then a message
//	tool         a tool call: pending without input, in_progress with input, completed with output
//	ask [silent] asks to run `rm -rf build` (execute): allowed, it completes; rejected, it
//	             fails (silent: reports nothing, as Gemini does); the message says the outcome
//	ask-edit P   asks to edit the file P (kind edit); the message says the outcome
//	fs DIR       reads and writes in.txt/sub/out.txt in its cwd, DIR/secret.txt (also
//	             by a path climbing out of its cwd) and DIR/outside.txt;
//	             the message reports each outcome
//	crash        a message chunk, then exits 3 mid-turn
//	ask-exit     asks for permission and exits 4 without waiting
//	huge         an update past the line cap, then a message
//	slow         a message, then waits for session/cancel (stop reason cancelled)
//	refuse, maxturns, maxtokens   those stop reasons
//	fail         the prompt fails with error code 429
//	mcp          the message is the mcpServers session/new got, as JSON
//	cost A...    a usage_update per A (the session's cumulative cost, AMOUNT
//	             in USD or AMOUNT:CURRENCY, "-" for none), a message; end_turn with usage
//	anything else: "echo: PROMPT"
func Agent(mode string, in io.Reader, out io.Writer) int {
	a := &agent{r: bufio.NewReader(in), w: out, mode: mode}
	return a.serve()
}

type agent struct {
	r      *bufio.Reader
	w      io.Writer
	mode   string
	nextID int
	cwd    string
	mcp    json.RawMessage
	cancel bool // session/cancel received in this turn
}

func (a *agent) next() (jsonrpc.Message, bool) {
	for {
		l, err := a.r.ReadBytes('\n')
		if len(strings.TrimSpace(string(l))) > 0 {
			var m jsonrpc.Message
			if json.Unmarshal(l, &m) == nil {
				if m.Method == "session/cancel" {
					a.cancelled()
				}
				return m, true
			}
		}
		if err != nil {
			return jsonrpc.Message{}, false
		}
	}
}

func (a *agent) cancelled() {
	a.cancel = true
	if f := os.Getenv(MarkEnv); f != "" {
		os.WriteFile(f, []byte("cancel"), 0o600)
	}
}

func (a *agent) send(line []byte) { a.w.Write(line) }

func (a *agent) reply(id json.RawMessage, res any) { a.send(rpc.Result(id, res)) }

func (a *agent) replyErr(id json.RawMessage, code int, text string) {
	a.send(rpc.Error(id, code, text))
}

func (a *agent) update(u map[string]any) {
	a.send(rpc.Notification("session/update", map[string]any{"sessionId": SessionID, "update": u}))
}

func (a *agent) say(text string) {
	a.update(map[string]any{"sessionUpdate": "agent_message_chunk", "content": map[string]any{"type": "text", "text": text}})
}

// call sends a request to the client and returns its answer.
func (a *agent) call(method string, params any) (jsonrpc.Message, bool) {
	a.nextID++
	id := a.nextID
	a.send(rpc.Request(id, method, params))
	for {
		m, ok := a.next()
		if !ok {
			return m, false
		}
		if m.Method == "" && string(m.ID) == fmt.Sprint(id) {
			return m, true
		}
	}
}

func (a *agent) serve() int {
	for {
		m, ok := a.next()
		if !ok {
			return 0
		}
		switch m.Method {
		case "initialize":
			if a.mode == "mute" {
				time.Sleep(30 * time.Second)
				return 0
			}
			a.reply(m.ID, map[string]any{"protocolVersion": 1, "authMethods": []any{},
				"agentInfo": map[string]any{"name": "fake-acp", "version": Version},
				"agentCapabilities": map[string]any{"loadSession": a.mode != "noload",
					"mcpCapabilities": map[string]any{"http": true, "sse": false}}})
		case "session/new", "session/load":
			var p struct {
				Cwd        string          `json:"cwd"`
				SessionID  string          `json:"sessionId"`
				McpServers json.RawMessage `json:"mcpServers"`
			}
			json.Unmarshal(m.Params, &p)
			a.cwd, a.mcp = p.Cwd, p.McpServers
			if m.Method == "session/new" {
				a.reply(m.ID, map[string]any{"sessionId": SessionID,
					"models": map[string]any{"currentModelId": "fake-model", "availableModels": []any{}}})
				continue
			}
			if p.SessionID != KnownSession {
				a.replyErr(m.ID, -32602, "session not found: "+p.SessionID)
				continue
			}
			// The history, replayed before the answer.
			a.update(map[string]any{"sessionUpdate": "user_message_chunk", "content": map[string]any{"type": "text", "text": "old prompt"}})
			a.say("old answer")
			a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "old-call", "title": "ls", "kind": "execute", "status": "completed"})
			a.update(map[string]any{"sessionUpdate": "usage_update", "used": 100, "size": 1000,
				"cost": map[string]any{"amount": KnownSessionCost, "currency": "USD"}})
			a.reply(m.ID, map[string]any{})
		case "session/set_mode":
			a.reply(m.ID, map[string]any{})
		case "session/prompt":
			var p struct {
				Prompt []struct {
					Text string `json:"text"`
				} `json:"prompt"`
			}
			json.Unmarshal(m.Params, &p)
			text := ""
			if len(p.Prompt) > 0 {
				text = p.Prompt[0].Text
			}
			a.cancel = false
			if code := a.prompt(m.ID, text); code >= 0 {
				return code
			}
		default:
			if len(m.ID) > 0 && m.Method != "" {
				a.replyErr(m.ID, -32601, "unknown method "+m.Method)
			}
		}
	}
}

func (a *agent) end(id json.RawMessage, reason string, usage map[string]any) {
	if a.cancel {
		reason = "cancelled"
	}
	res := map[string]any{"stopReason": reason}
	if usage != nil {
		res["usage"] = usage
	}
	a.reply(id, res)
}

// prompt plays the script of the prompt text and answers the prompt. It
// returns an exit status to exit with, or -1 to go on.
func (a *agent) prompt(id json.RawMessage, text string) int {
	words := strings.Fields(text)
	first, arg := "", ""
	if len(words) > 0 {
		first = words[0]
	}
	if len(words) > 1 {
		arg = words[1]
	}
	switch first {
	case "hello":
		a.update(map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": "thinking "}})
		a.update(map[string]any{"sessionUpdate": "agent_thought_chunk", "content": map[string]any{"type": "text", "text": "hard"}})
		for _, c := range []struct{ id, text string }{{"m1", "Hello "}, {"m1", "there."}, {"m2", "Second message."}} {
			a.update(map[string]any{"sessionUpdate": "agent_message_chunk", "messageId": c.id, "content": map[string]any{"type": "text", "text": c.text}})
			if c.text == "there." {
				a.update(map[string]any{"sessionUpdate": "plan", "entries": []any{map[string]any{"content": "step one", "priority": "high", "status": "pending"}}})
			}
		}
		a.end(id, "end_turn", map[string]any{"inputTokens": 11, "outputTokens": 7, "totalTokens": 18, "thoughtTokens": 3})
	case "mystery":
		a.update(map[string]any{"sessionUpdate": "mystery_update", "data": 1})
		a.say("after mystery")
		a.end(id, "end_turn", nil)
	case "tool":
		a.update(map[string]any{"sessionUpdate": "tool_call", "toolCallId": "call-ls", "title": "ls", "kind": "execute", "status": "pending", "rawInput": map[string]any{}})
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-ls", "status": "in_progress", "rawInput": map[string]any{"command": "ls -la"}})
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": "call-ls", "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "a.txt\nb.txt"}}}})
		a.say("listed")
		a.end(id, "end_turn", nil)
	case "ask", "ask-edit", "ask-exit":
		return a.ask(id, first, arg)
	case "fs":
		a.fs(arg)
		a.end(id, "end_turn", nil)
	case "crash":
		a.say("partial answer")
		fmt.Fprintln(os.Stderr, "fake acp agent crashed on purpose")
		return 3
	case "huge":
		a.say(strings.Repeat("x", HugeLine))
		a.say("after huge")
		a.end(id, "end_turn", nil)
	case "slow":
		a.say("working")
		deadline := time.Now().Add(30 * time.Second)
		for !a.cancel && time.Now().Before(deadline) {
			if _, ok := a.next(); !ok {
				return 0
			}
		}
		a.end(id, "end_turn", nil)
	case "refuse":
		a.end(id, "refusal", nil)
	case "maxturns":
		a.end(id, "max_turn_requests", nil)
	case "maxtokens":
		a.say("cut sho")
		a.end(id, "max_tokens", nil)
	case "fail":
		a.replyErr(id, 429, "slow down")
	case "mcp":
		a.say(string(a.mcp))
		a.end(id, "end_turn", nil)
	case "cost":
		for _, w := range words[1:] {
			u := map[string]any{"sessionUpdate": "usage_update", "used": 200, "size": 1000}
			if w != "-" {
				amount, currency, _ := strings.Cut(w, ":")
				if currency == "" {
					currency = "USD"
				}
				var n float64
				fmt.Sscan(amount, &n)
				u["cost"] = map[string]any{"amount": n, "currency": currency}
			}
			a.update(u)
		}
		a.say("spent")
		a.end(id, "end_turn", map[string]any{"inputTokens": 20, "outputTokens": 5, "totalTokens": 25})
	default:
		a.say("echo: " + text)
		a.end(id, "end_turn", nil)
	}
	return -1
}

// ask asks for permission for a call, and reports the outcome.
func (a *agent) ask(id json.RawMessage, what, arg string) int {
	call := map[string]any{"toolCallId": "call-rm", "title": "rm -rf build", "kind": "execute", "status": "pending",
		"rawInput": map[string]any{"command": "rm -rf build"}}
	if what == "ask-edit" {
		call = map[string]any{"toolCallId": "call-edit", "title": "Editing " + arg, "kind": "edit", "status": "pending",
			"locations": []any{map[string]any{"path": arg}}}
	}
	params := map[string]any{"sessionId": SessionID, "toolCall": call, "options": []any{
		map[string]any{"optionId": "yes-once", "name": "Allow", "kind": "allow_once"},
		map[string]any{"optionId": "yes-always", "name": "Always allow", "kind": "allow_always"},
		map[string]any{"optionId": "no", "name": "Reject", "kind": "reject_once"}}}
	if what == "ask-exit" {
		a.nextID++
		a.send(rpc.Request(a.nextID, "session/request_permission", params))
		return 4
	}
	m, ok := a.call("session/request_permission", params)
	if !ok {
		return 5
	}
	var r struct {
		Outcome struct {
			Outcome  string `json:"outcome"`
			OptionID string `json:"optionId"`
		} `json:"outcome"`
	}
	json.Unmarshal(m.Result, &r)
	callID := call["toolCallId"]
	switch {
	case r.Outcome.Outcome == "cancelled":
		// A client cancels the outcome when it cancels the turn: the
		// session/cancel follows.
		for !a.cancel {
			if _, ok := a.next(); !ok {
				return 6
			}
		}
		a.say("cancelled")
	case strings.HasPrefix(r.Outcome.OptionID, "yes"):
		a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": "completed",
			"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "done it"}}}})
		a.say("allowed " + r.Outcome.OptionID)
	default:
		if arg != "silent" {
			a.update(map[string]any{"sessionUpdate": "tool_call_update", "toolCallId": callID, "status": "failed",
				"content": []any{map[string]any{"type": "content", "content": map[string]any{"type": "text", "text": "rejected by the user"}}}})
		}
		a.say("rejected " + r.Outcome.OptionID)
	}
	a.end(id, "end_turn", nil)
	return -1
}

// fs reads and writes inside its cwd and in dir, reporting each outcome.
func (a *agent) fs(dir string) {
	var report []string
	do := func(name, method string, params map[string]any) {
		params["sessionId"] = SessionID
		m, ok := a.call(method, params)
		switch {
		case !ok:
			report = append(report, name+"=eof")
		case m.Error != nil:
			report = append(report, fmt.Sprintf("%s=err:%d", name, m.Error.Code))
		default:
			var r struct {
				Content string `json:"content"`
			}
			json.Unmarshal(m.Result, &r)
			report = append(report, name+"=ok:"+r.Content)
		}
	}
	do("read-in", "fs/read_text_file", map[string]any{"path": filepath.Join(a.cwd, "in.txt")})
	do("read-line", "fs/read_text_file", map[string]any{"path": filepath.Join(a.cwd, "in.txt"), "line": 2, "limit": 1})
	do("read-missing", "fs/read_text_file", map[string]any{"path": filepath.Join(a.cwd, "missing.txt")})
	do("read-out", "fs/read_text_file", map[string]any{"path": filepath.Join(dir, "secret.txt")})
	do("read-rel", "fs/read_text_file", map[string]any{"path": "in.txt"})
	// DIR's secret.txt by way of the cwd: an absolute path that climbs out.
	up, _ := filepath.Rel(a.cwd, filepath.Join(dir, "secret.txt"))
	do("read-up", "fs/read_text_file", map[string]any{"path": a.cwd + string(filepath.Separator) + up})
	do("write-in", "fs/write_text_file", map[string]any{"path": filepath.Join(a.cwd, "sub", "out.txt"), "content": "written\n"})
	do("write-out", "fs/write_text_file", map[string]any{"path": filepath.Join(dir, "outside.txt"), "content": "escaped\n"})
	do("write-link", "fs/write_text_file", map[string]any{"path": filepath.Join(a.cwd, "link", "via-link.txt"), "content": "escaped\n"})
	a.say(strings.Join(report, ";"))
}

// NoInputs is a drover.Live that never has inputs: a Request with it is a
// live run, for tests of how an adapter prepares one.
type NoInputs struct{}

// Ready implements drover.Live.
func (NoInputs) Ready() <-chan struct{} { return nil }

// Take implements drover.Live.
func (NoInputs) Take() []drover.LiveInput { return nil }
