package acp

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/jsonrpc"
	"github.com/drover-run/drover/internal/runner"
)

// toolUpdate is a tool_call, a tool_call_update or a permission request's
// toolCall as drover reads it: ACP's fields, the lists element by element,
// so that one element the agent got wrong does not lose the rest.
type toolUpdate struct {
	ToolCallID string            `json:"toolCallId"`
	Title      *string           `json:"title"`
	Kind       *string           `json:"kind"`
	Status     *string           `json:"status"`
	RawInput   json.RawMessage   `json:"rawInput"`
	RawOutput  json.RawMessage   `json:"rawOutput"`
	Content    []json.RawMessage `json:"content"`
	Locations  []json.RawMessage `json:"locations"`
}

// call is what drover knows of one tool call.
type call struct {
	id, name, title, kind string
	input                 map[string]any // rawInput, merged: the first value of a key wins
	paths                 []string       // the files it acts on: locations, diffs, rawInput
	newText               string         // its last diff's new text
	output                string         // its last content's text
	rawOutput             json.RawMessage
	used, done, rejected  bool // tool_use and tool_result emitted; drover rejected it
}

// pathKeys are the rawInput keys naming the file a call acts on.
var pathKeys = []string{"file_path", "filePath", "filepath", "path", "absolute_path"}

// track returns the call u is about, created when new (and named, once)
// and updated with what u says.
func (c *Conversation) track(u toolUpdate) *call {
	k, ok := c.calls[u.ToolCallID]
	if !ok {
		k = &call{id: u.ToolCallID, input: map[string]any{}}
		c.calls[u.ToolCallID] = k
	}
	if u.Title != nil && *u.Title != "" {
		k.title = *u.Title
	}
	if u.Kind != nil && *u.Kind != "" {
		k.kind = *u.Kind
	}
	var in map[string]any
	if json.Unmarshal(u.RawInput, &in) == nil {
		for key, v := range in {
			if _, seen := k.input[key]; !seen {
				k.input[key] = v
			}
			if s, ok := v.(string); ok && s != "" && slices.Contains(pathKeys, key) {
				k.addPath(s, c.sess.Cwd)
			}
		}
	}
	for _, raw := range u.Locations {
		var l acpsdk.ToolCallLocation
		if json.Unmarshal(raw, &l) == nil && l.Path != "" {
			k.addPath(l.Path, c.sess.Cwd)
		}
	}
	if len(u.Content) > 0 {
		var texts []string
		for _, raw := range u.Content {
			var tc acpsdk.ToolCallContent
			if json.Unmarshal(raw, &tc) != nil {
				continue
			}
			switch {
			case tc.Content != nil && tc.Content.Content.Text != nil:
				texts = append(texts, tc.Content.Content.Text.Text)
			case tc.Diff != nil:
				k.addPath(tc.Diff.Path, c.sess.Cwd)
				k.newText = tc.Diff.NewText
			}
		}
		k.output = strings.Join(texts, "\n")
	}
	if len(u.RawOutput) > 0 && string(u.RawOutput) != "null" {
		k.rawOutput = u.RawOutput
	}
	if !ok {
		k.name = c.toolName(Call{ID: k.id, Title: k.title, Kind: k.kind})
	}
	return k
}

func (k *call) addPath(p, cwd string) {
	if !filepath.IsAbs(p) && cwd != "" {
		p = filepath.Join(cwd, p)
	}
	p = filepath.Clean(p)
	if !slices.Contains(k.paths, p) {
		k.paths = append(k.paths, p)
	}
}

// toolName names a new call: the dialect's name, else its ACP kind.
func (c *Conversation) toolName(k Call) string {
	if c.d.ToolName != nil {
		if n := c.d.ToolName(k); n != "" {
			return n
		}
	}
	if k.Kind != "" {
		return k.Kind
	}
	return "tool"
}

// kindTools describe a call named by its ACP kind (the dialect names it
// no other way) by the rawInput members agents speaking ACP use; the
// other kinds (delete, move, think, switch_mode, other) read as the
// call's title.
var kindTools = runner.Tools{
	string(acpsdk.ToolKindExecute): {Kind: drover.ToolShell, Keys: []string{"command", "cmd"}},
	string(acpsdk.ToolKindEdit):    {Kind: drover.ToolEdit, Keys: []string{"file_path", "path", "filePath", "notebook_path"}},
	string(acpsdk.ToolKindRead):    {Kind: drover.ToolRead, Keys: []string{"file_path", "path", "filePath", "absolute_path"}},
	string(acpsdk.ToolKindSearch):  {Kind: drover.ToolSearch, Keys: []string{"pattern", "query"}},
	string(acpsdk.ToolKindFetch):   {Kind: drover.ToolFetch, Keys: []string{"url", "prompt"}},
}

// callInput is the call's input: its rawInput, or, when the agent sends
// none (Gemini), what ACP's other fields say: the file it acts on (path),
// a diff's new text (content), an execute call's title (command: the
// command line, in the agents measured).
func (k *call) callInput() map[string]any {
	if len(k.input) > 0 {
		return maps.Clone(k.input)
	}
	in := map[string]any{}
	if len(k.paths) > 0 {
		in["path"] = k.paths[0]
	}
	if k.newText != "" {
		in["content"] = k.newText
	}
	if k.kind == string(acpsdk.ToolKindExecute) && k.title != "" {
		in["command"] = k.title
	}
	if len(in) == 0 && k.title != "" {
		in["title"] = k.title
	}
	return in
}

// description is the call's one-line description (UES-5): by the
// dialect's tools, else by its ACP kind when it is named by it, else its
// title ("Using NAME" when it has none).
func (c *Conversation) description(k *call, input map[string]any) string {
	for _, tools := range []runner.Tools{c.d.Tools, kindTools} {
		if _, ok := tools[k.name]; ok {
			return tools.Describe(k.name, input)
		}
	}
	if k.title != "" {
		return k.title
	}
	return drover.DescribeCall(drover.ToolOther, k.name, "")
}

// use returns the call's tool_use (once).
func (c *Conversation) use(k *call) []drover.Event {
	if k.used {
		return nil
	}
	k.used = true
	c.toolUses++
	c.timing.Start(k.id, k.name, c.Now())
	in := k.callInput()
	return []drover.Event{c.Event(drover.TypeToolUse, drover.ToolUsePayload{ToolName: k.name, ToolUseID: k.id,
		Input: in, Description: c.description(k, in)})}
}

// result returns the call's tool_result (once), after its tool_use if that
// is still due.
func (c *Conversation) result(k *call, st drover.ToolStatus, out string) []drover.Event {
	if k == nil || k.done {
		return nil
	}
	evs := c.use(k)
	k.done = true
	c.rejected = slices.DeleteFunc(c.rejected, func(id string) bool { return id == k.id })
	return append(evs, c.Event(drover.TypeToolResult, c.timing.Result(k.id, st, out, c.Now())))
}

// resultOutput is what the call reported: its content's text, else its
// rawOutput (its "output" or "error" text, or the JSON).
func (k *call) resultOutput() string {
	if k.output != "" || len(k.rawOutput) == 0 {
		return k.output
	}
	var s string
	if json.Unmarshal(k.rawOutput, &s) == nil {
		return s
	}
	var obj map[string]any
	if json.Unmarshal(k.rawOutput, &obj) == nil {
		for _, key := range []string{"output", "error"} {
			if s, ok := obj[key].(string); ok && s != "" {
				return s
			}
		}
	}
	return string(k.rawOutput)
}

// toolUpdate maps a tool_call or tool_call_update. A call is reported
// (tool_use) once it runs (or is asked about, see requestPermission), with
// what is known of its input by then, and its result once it
// completes or fails: failed is "denied" when drover rejected it or the
// dialect says the agent refused it, else "error". What the agent says
// of a call after its result is an extension event.
func (c *Conversation) toolUpdate(u toolUpdate, first bool, raw json.RawMessage) []drover.Event {
	_, known := c.calls[u.ToolCallID]
	k := c.track(u)
	name := "tool_call_update"
	if first {
		name = "tool_call"
	}
	if known && k.done {
		return []drover.Event{c.Extension(name, raw)}
	}
	status := ""
	if u.Status != nil {
		status = *u.Status
	}
	// A pending call is not reported yet: its input may still come
	// (OpenCode's first tool_call has none, or only its cwd).
	var evs []drover.Event
	if status != "" && status != string(acpsdk.ToolCallStatusPending) {
		evs = c.use(k)
	}
	switch acpsdk.ToolCallStatus(status) {
	case acpsdk.ToolCallStatusCompleted:
		evs = append(evs, c.result(k, drover.ToolSuccess, k.resultOutput())...)
	case acpsdk.ToolCallStatusFailed:
		out := k.resultOutput()
		st := drover.ToolError
		if k.rejected || c.d.Denied != nil && c.d.Denied(out) {
			st = drover.ToolDenied
		}
		evs = append(evs, c.result(k, st, out)...)
	}
	return evs
}

// reject marks call id as rejected by drover: its result is "denied", and
// is synthesized should the agent report nothing (see settle).
func (c *Conversation) reject(id string) {
	k := c.calls[id]
	if k == nil || k.rejected {
		return
	}
	k.rejected = true
	if !k.done {
		c.rejected = append(c.rejected, id)
	}
}

// ask is an open session/request_permission of the agent's.
type ask struct {
	rpcID   json.RawMessage
	options []acpsdk.PermissionOption
	call    string
}

// answer is the result of a's request: the agent's option of the kind the
// answer asks for, else the other of the same behaviour, else cancelled.
func (a *ask) answer(allow, always bool) acpsdk.RequestPermissionResponse {
	kinds := []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindRejectOnce, acpsdk.PermissionOptionKindRejectAlways}
	switch {
	case allow && always:
		kinds = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowAlways, acpsdk.PermissionOptionKindAllowOnce}
	case allow:
		kinds = []acpsdk.PermissionOptionKind{acpsdk.PermissionOptionKindAllowOnce, acpsdk.PermissionOptionKindAllowAlways}
	}
	for _, kind := range kinds {
		for _, o := range a.options {
			if o.Kind == kind {
				return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeSelected(o.OptionId)}
			}
		}
	}
	return acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()}
}

// allows reports whether the answer allows the call.
func allows(r acpsdk.RequestPermissionResponse, options []acpsdk.PermissionOption) bool {
	s := r.Outcome.Selected
	if s == nil {
		return false
	}
	for _, o := range options {
		if o.OptionId == s.OptionId {
			return o.Kind == acpsdk.PermissionOptionKindAllowOnce || o.Kind == acpsdk.PermissionOptionKindAllowAlways
		}
	}
	return false
}

// requestPermission handles session/request_permission. What the tier
// decides is answered at once: autonomous allows everything; sandbox and
// dry-run reject everything; supervised allows edits of files inside the
// run's directories. The rest becomes a permission_request, answered by
// Pass; with no Live to answer it, it is rejected at once.
func (c *Conversation) requestPermission(m jsonrpc.Message, raw []byte) []drover.Event {
	var p struct {
		Options  []acpsdk.PermissionOption `json:"options"`
		ToolCall toolUpdate                `json:"toolCall"`
	}
	if err := json.Unmarshal(m.Params, &p); err != nil {
		// What it asks cannot be known: refused.
		c.out = append(c.out, rpc.Result(m.ID, acpsdk.RequestPermissionResponse{Outcome: acpsdk.NewRequestPermissionOutcomeCancelled()})...)
		return []drover.Event{c.Extension("request_permission", raw)}
	}
	if p.ToolCall.ToolCallID == "" {
		p.ToolCall.ToolCallID = "acp-permission-" + strings.Trim(string(m.ID), `"`)
	}
	k := c.track(p.ToolCall)
	evs := append(c.flush(), c.use(k)...)
	a := &ask{rpcID: m.ID, options: p.Options, call: k.id}
	decide := func(allow bool, ext string) []drover.Event {
		r := a.answer(allow, false)
		if !allows(r, a.options) {
			c.reject(k.id)
		}
		c.out = append(c.out, rpc.Result(m.ID, r)...)
		return append(evs, c.Extension(ext, raw))
	}
	switch tier := c.sess.Tier; {
	case tier == drover.TierAutonomous:
		return decide(true, "auto_approved")
	case tier == drover.TierSandbox || tier == drover.TierDryRun:
		return decide(false, "auto_declined")
	case tier == drover.TierSupervised && c.workspaceEdit(k):
		return decide(true, "auto_approved")
	case !c.sess.Live:
		return decide(false, "auto_declined")
	}
	in := k.callInput()
	req := drover.PermissionRequestPayload{RequestID: c.requestID(k.id), ToolName: k.name, ToolUseID: k.id,
		Input: in, Description: c.description(k, in), Reason: k.output}
	c.asks[req.RequestID] = a
	ev := c.Event(drover.TypePermissionRequest, req)
	ev.Metadata = map[string]any{"options": p.Options}
	return append(evs, ev)
}

// workspaceEdit reports whether k edits only files inside the run's
// directories: what supervised allows without asking (PERM-1).
func (c *Conversation) workspaceEdit(k *call) bool {
	switch acpsdk.ToolKind(k.kind) {
	case acpsdk.ToolKindEdit, acpsdk.ToolKindDelete, acpsdk.ToolKindMove:
	default:
		return false
	}
	return len(k.paths) > 0 && !slices.ContainsFunc(k.paths, func(p string) bool { return !contain.InRoots(p, c.roots) })
}

// requestID returns a request id unique in the run: the call's id the
// first time it is asked about, then that id with the number of the
// question ("call-1#2": an agent may ask twice about one call).
func (c *Conversation) requestID(callID string) string {
	c.asked[callID]++
	if n := c.asked[callID]; n > 1 {
		return fmt.Sprintf("%s#%d", callID, n)
	}
	return callID
}

// mcpServers returns the run's MCP servers in ACP's shape, by name, or an
// error naming one whose transport the agent did not advertise (stdio it
// must always take).
func mcpServers(servers map[string]drover.MCPServer, caps acpsdk.McpCapabilities) ([]acpsdk.McpServer, error) {
	out := []acpsdk.McpServer{}
	for _, name := range slices.Sorted(maps.Keys(servers)) {
		s := servers[name]
		headers := []acpsdk.HttpHeader{}
		for _, k := range slices.Sorted(maps.Keys(s.Headers)) {
			headers = append(headers, acpsdk.HttpHeader{Name: k, Value: s.Headers[k]})
		}
		switch t := s.Transport(); {
		case t == "stdio":
			env := []acpsdk.EnvVariable{}
			for _, k := range slices.Sorted(maps.Keys(s.Env)) {
				env = append(env, acpsdk.EnvVariable{Name: k, Value: s.Env[k]})
			}
			args := s.Args
			if args == nil {
				args = []string{}
			}
			out = append(out, acpsdk.McpServer{Stdio: &acpsdk.McpServerStdio{Name: name, Command: s.Command, Args: args, Env: env}})
		case t == "http" && caps.Http:
			out = append(out, acpsdk.McpServer{Http: &acpsdk.McpServerHttpInline{Name: name, Type: "http", Url: s.URL, Headers: headers}})
		case t == "sse" && caps.Sse:
			out = append(out, acpsdk.McpServer{Sse: &acpsdk.McpServerSseInline{Name: name, Type: "sse", Url: s.URL, Headers: headers}})
		default:
			return nil, fmt.Errorf("mcp server %q: the agent does not take %s MCP servers", name, t)
		}
	}
	return out, nil
}
