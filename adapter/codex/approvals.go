package codex

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/jsonrpc"
)

// ask is an approval request of the app-server's that the engine decides
// (a permission_request): what answering it takes.
type ask struct {
	id     json.RawMessage // the server's request id
	method string
	tool   string
	// requested is what item/permissions/requestApproval asked for, granted
	// as asked on allow.
	requested json.RawMessage
}

// answer is the result answering a's request: allowed (for the session,
// with always) or declined. Declining lets the turn go on (Codex's
// "cancel" would interrupt it).
func (a *ask) answer(allow, always bool) any {
	switch a.method {
	case "mcpServer/elicitation/request":
		if !allow {
			return map[string]any{"action": "decline"}
		}
		r := map[string]any{"action": "accept", "content": map[string]any{}}
		if always {
			r["_meta"] = map[string]any{"persist": "session"} // measured: not asked again
		}
		return r
	case "item/permissions/requestApproval":
		if !allow {
			return map[string]any{"permissions": map[string]any{}}
		}
		scope := "turn"
		if always {
			scope = "session"
		}
		return map[string]any{"permissions": a.requested, "scope": scope}
	}
	decision := "accept"
	switch {
	case !allow:
		decision = "decline"
	case always:
		decision = "acceptForSession" // measured: the same command (or file) is not asked again
	}
	return map[string]any{"decision": decision}
}

// serverRequest handles a request of the server's: an approval becomes a
// permission_request, unless the tier answers it (edits in the workspace
// in supervised, everything in autonomous; nothing is approved in sandbox
// or dry-run, which never ask); anything else is answered at once.
func (c *conversation) serverRequest(m jsonrpc.Message, raw []byte) []drover.Event {
	a := &ask{id: m.ID, method: m.Method}
	var req drover.PermissionRequestPayload
	hint := "" // the preferred request id
	switch m.Method {
	case "item/commandExecution/requestApproval":
		var p struct {
			ItemID     string          `json:"itemId"`
			ApprovalID string          `json:"approvalId"`
			Kind       string          `json:"kind"`
			Command    string          `json:"command"`
			Cwd        string          `json:"cwd"`
			Reason     string          `json:"reason"`
			Network    json.RawMessage `json:"networkApprovalContext"`
		}
		_ = json.Unmarshal(m.Params, &p)
		a.tool = "exec_command"
		if p.Kind == "writeStdin" {
			a.tool = "write_stdin" // input to a command already running
		}
		// The script inside Codex's shell wrapper: what rules match.
		input := map[string]any{"command": unwrapShell(p.Command)}
		if p.Cwd != "" {
			input["cwd"] = p.Cwd
		}
		var network map[string]any
		if json.Unmarshal(p.Network, &network) == nil && network != nil {
			input["network"] = network
		}
		req = drover.PermissionRequestPayload{ToolUseID: p.ItemID, Input: input, Reason: p.Reason}
		hint = p.ItemID
		if p.ApprovalID != "" {
			hint += "/" + p.ApprovalID
		}
	case "item/fileChange/requestApproval":
		var p struct {
			ItemID    string `json:"itemId"`
			Reason    string `json:"reason"`
			GrantRoot string `json:"grantRoot"`
		}
		_ = json.Unmarshal(m.Params, &p)
		a.tool = "apply_patch"
		changes, known := c.changes[p.ItemID]
		if c.info.tier == drover.TierSupervised && known && p.GrantRoot == "" && insideRoots(changes, c.roots) {
			// PERM-1: supervised edits the workspace without asking; Codex's
			// "untrusted" asks for every edit.
			c.out = append(c.out, rpc.Result(m.ID, a.answer(true, false))...)
			return []drover.Event{c.Extension("auto_approved", raw)}
		}
		input := map[string]any{"changes": changesInput(appItem{item: item{Type: "fileChange"}, Changes: changes}.exec().Changes)}
		if len(changes) == 1 {
			input["path"] = changes[0].Path
		}
		if p.GrantRoot != "" {
			input["grantRoot"] = p.GrantRoot
		}
		req = drover.PermissionRequestPayload{ToolUseID: p.ItemID, Input: input, Reason: p.Reason}
		hint = p.ItemID
	case "mcpServer/elicitation/request":
		var p struct {
			ServerName string `json:"serverName"`
			Message    string `json:"message"`
			Meta       struct {
				Kind       string         `json:"codex_approval_kind"`
				ToolName   string         `json:"tool_name"`
				ToolParams map[string]any `json:"tool_params"`
			} `json:"_meta"`
		}
		_ = json.Unmarshal(m.Params, &p)
		if p.Meta.Kind != "mcp_tool_call" {
			// An MCP server asking the user for input: there is no one to
			// fill its form in.
			c.out = append(c.out, rpc.Result(m.ID, map[string]any{"action": "decline"})...)
			return []drover.Event{c.Extension("mcpServer_elicitation_request", raw)}
		}
		a.tool = "mcp__" + p.ServerName + "__" + p.Meta.ToolName
		input := p.Meta.ToolParams
		if input == nil {
			input = map[string]any{}
		}
		req = drover.PermissionRequestPayload{ToolUseID: c.mcpCall(p.ServerName, p.Meta.ToolName), Input: input, Reason: p.Message}
		hint = req.ToolUseID
	case "item/permissions/requestApproval":
		var p struct {
			ItemID      string          `json:"itemId"`
			Cwd         string          `json:"cwd"`
			Permissions json.RawMessage `json:"permissions"`
			Reason      string          `json:"reason"`
		}
		_ = json.Unmarshal(m.Params, &p)
		a.tool, a.requested = "request_permissions", p.Permissions
		input := map[string]any{"cwd": p.Cwd}
		var perms map[string]any
		if json.Unmarshal(p.Permissions, &perms) == nil && perms != nil {
			input["permissions"] = perms
		}
		req = drover.PermissionRequestPayload{ToolUseID: p.ItemID, Input: input, Reason: p.Reason}
		hint = p.ItemID
	case "item/tool/requestUserInput":
		// request_user_input: nobody can answer the model's questions.
		c.out = append(c.out, rpc.Result(m.ID, map[string]any{"answers": map[string]any{}})...)
		return []drover.Event{c.Extension("item_tool_requestUserInput", raw)}
	default:
		// Requests drover has no answer for (dynamic tools it never
		// registered, ChatGPT token refresh, attestation) are refused, so
		// that the server does not wait for them.
		c.out = append(c.out, rpc.Error(m.ID, jsonrpc.CodeMethodNotFound, "drover does not handle "+m.Method)...)
		return []drover.Event{c.Extension(strings.ReplaceAll(m.Method, "/", "_"), raw)}
	}
	switch c.info.tier {
	case drover.TierAutonomous:
		c.out = append(c.out, rpc.Result(m.ID, a.answer(true, false))...)
		return []drover.Event{c.Extension("auto_approved", raw)}
	case drover.TierSandbox, drover.TierDryRun:
		c.out = append(c.out, rpc.Result(m.ID, a.answer(false, false))...)
		return []drover.Event{c.Extension("auto_declined", raw)}
	}
	req.ToolName, req.Description = a.tool, tools.Describe(a.tool, req.Input)
	req.RequestID = c.requestID(hint, m.ID)
	c.asks[req.RequestID] = a
	return []drover.Event{c.Event(drover.TypePermissionRequest, req)}
}

// requestID returns a request id unique in the run: the item's id when it
// has one not yet used, else one from the server's request id.
func (c *conversation) requestID(hint string, rpcID json.RawMessage) string {
	id := hint
	if id == "" || c.asked[id] {
		id = "codex-rpc-" + strings.Trim(string(rpcID), `"`)
	}
	for n, base := 2, id; c.asked[id]; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	c.asked[id] = true
	return id
}

// mcpCall returns the id of the latest MCP tool call of server's tool
// still running: the call an MCP approval is about ("" when none is).
func (c *conversation) mcpCall(server, tool string) string {
	for i := len(c.mcpCalls) - 1; i >= 0; i-- {
		if it := c.mcpCalls[i]; it.Server == server && it.Tool == tool {
			return it.ID
		}
	}
	return ""
}

// Pass implements runner.Conversation. An answer becomes the response to
// its request; Codex's responses carry no message, so a denial's message
// (and an allow with a changed input, which Codex cannot apply: the call is
// declined) follows as a steering message the model reads in the same
// turn. A steering message becomes turn/steer and an interrupt
// turn/interrupt, sent once the turn has an id and Codex has recorded its
// prompt. An answer to no open request, or steering after the turn ended,
// is refused.
func (c *conversation) Pass(in drover.LiveInput) ([]byte, error) {
	switch {
	case in.Answer != nil:
		ans := in.Answer
		a, ok := c.asks[ans.RequestID]
		if !ok {
			return nil, fmt.Errorf("codex has no open request %q", ans.RequestID)
		}
		delete(c.asks, ans.RequestID)
		allow, note := ans.Behavior == drover.Allow, ""
		switch {
		case allow && len(ans.UpdatedInput) > 0:
			allow = false
			note = fmt.Sprintf("%s was allowed only with another input, which Codex cannot apply to the call: %s", a.tool, jsonText(ans.UpdatedInput))
		case !allow && ans.Message != "":
			note = fmt.Sprintf("%s was denied: %s", a.tool, ans.Message)
		}
		out := rpc.Result(a.id, a.answer(allow, allow && ans.Always))
		if note != "" && c.turnID != "" && !c.turnDone {
			out = append(out, c.steer(note)...)
		}
		return out, nil
	case in.Steer != nil || in.Interrupt != nil:
		if c.turnDone || c.closeIn {
			return nil, errors.New("the codex turn has ended")
		}
		if !c.ready() {
			c.waiting = append(c.waiting, in)
			return nil, nil
		}
		return c.turnInput(in), nil
	}
	return nil, errors.New("empty live input")
}

// jsonText is v as compact JSON.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// protectedDirs are the directories Codex keeps read-only inside a
// writable root; an edit there is asked for.
var protectedDirs = []string{".git", ".codex", ".agents"}

// insideRoots reports whether every file the changes touch (a move's
// target too) lies in one of roots, outside protectedDirs, with symbolic
// links resolved: the edits supervised makes without asking.
func insideRoots(changes []appChange, roots []string) bool {
	if len(changes) == 0 {
		return false
	}
	for _, ch := range changes {
		paths := []string{ch.Path}
		if ch.Kind.MovePath != nil {
			paths = append(paths, *ch.Kind.MovePath)
		}
		for _, p := range paths {
			if !filepath.IsAbs(p) {
				return false
			}
			p = contain.Resolve(p)
			if !slices.ContainsFunc(roots, func(r string) bool { return underRoot(p, r) }) {
				return false
			}
		}
	}
	return true
}

// underRoot reports whether p is below root and not in a protected
// directory of it.
func underRoot(p, root string) bool {
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == "." || !contain.Within(p, root) {
		return false
	}
	return !slices.ContainsFunc(strings.Split(rel, string(filepath.Separator)), func(part string) bool {
		return slices.Contains(protectedDirs, part)
	})
}
