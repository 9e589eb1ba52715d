package codex

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// Codex hides refused tool calls from `exec --json` (measured on 0.169.0):
//
//   - a call its tool router rejects (apply_patch outside the writable roots
//     or in a read-only sandbox, a request for escalated permissions, a tool
//     that is not offered) prints no item at all, only a stderr log line
//     "ERROR codex_core::tools::router: error=<what the model is told>";
//   - a shell command the sandbox blocks (non-zero exit, output naming a
//     sandbox failure such as "Read-only file system") prints no item and
//     nothing on stderr.
//
// Both are recorded in the thread's rollout file
// (CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread id>.jsonl): the
// call (function_call / custom_tool_call with call_id, name, arguments) and
// what Codex answered the model (…_output). Finish reads it to surface them
// as tool_use + tool_result{denied}, and to learn the thread's usage before
// this run (turn.completed.usage is cumulative over the thread). Without a
// readable rollout, the stderr router lines are the fallback.

// rollout is what drover reads from a thread's rollout file about the last
// turn (the one this exec run added).
type rollout struct {
	found     bool
	before    usage // thread totals before this run's turn
	responses int64 // model responses in this run's turn
	calls     []rolloutCall
}

type rolloutCall struct {
	callID    string
	name      string
	input     map[string]any
	output    string
	hasOutput bool
}

type rolloutLine struct {
	Type    string `json:"type"`
	Payload struct {
		Type      string          `json:"type"`
		Name      string          `json:"name"`
		Namespace string          `json:"namespace"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		CallID    string          `json:"call_id"`
		Output    json.RawMessage `json:"output"`
		Info      *struct {
			Total *usage `json:"total_token_usage"`
		} `json:"info"`
	} `json:"payload"`
}

// rolloutPath finds the rollout file of thread under home, or "".
func rolloutPath(home, thread string) string {
	for _, dir := range []string{"sessions", "archived_sessions"} {
		for _, pat := range []string{"*/*/*/rollout-*" + thread + ".jsonl", "rollout-*" + thread + ".jsonl"} {
			m, _ := filepath.Glob(filepath.Join(home, dir, pat))
			if len(m) > 0 {
				slices.Sort(m)
				return m[len(m)-1]
			}
		}
	}
	return ""
}

// readRollout reads the last turn of thread's rollout; nil when there is no
// readable rollout (ephemeral thread, another CODEX_HOME).
func readRollout(home, thread string) *rollout {
	path := rolloutPath(home, thread)
	if path == "" {
		return nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	return parseRollout(bufio.NewReader(f))
}

// parseRollout reads rollout lines; what counts is after the last
// task_started (exec runs one turn per process).
func parseRollout(r *bufio.Reader) *rollout {
	ro := &rollout{found: true}
	var total usage
	byID := map[string]int{}
	for {
		raw, err := r.ReadBytes('\n')
		if len(raw) > 0 {
			var l rolloutLine
			if json.Unmarshal(raw, &l) == nil {
				p := l.Payload
				switch {
				case l.Type == "event_msg" && p.Type == "task_started":
					ro.before, ro.responses, ro.calls = total, 0, nil
					byID = map[string]int{}
				case l.Type == "event_msg" && p.Type == "token_count":
					if p.Info != nil && p.Info.Total != nil {
						total = *p.Info.Total
					}
				case l.Type == "token_usage_record":
					ro.responses++
				case l.Type == "response_item" && (p.Type == "function_call" || p.Type == "custom_tool_call"):
					c := rolloutCall{callID: p.CallID, name: p.Name, input: map[string]any{}}
					if p.Namespace != "" {
						c.name = strings.TrimSuffix(p.Namespace, "__") + "__" + p.Name
					}
					if p.Type == "custom_tool_call" {
						c.input["input"] = p.Input
					} else if p.Arguments != "" {
						if json.Unmarshal([]byte(p.Arguments), &c.input) != nil || c.input == nil {
							c.input = map[string]any{"arguments": p.Arguments}
						}
					}
					byID[c.callID] = len(ro.calls)
					ro.calls = append(ro.calls, c)
				case l.Type == "response_item" && (p.Type == "function_call_output" || p.Type == "custom_tool_call_output"):
					if i, ok := byID[p.CallID]; ok {
						ro.calls[i].output, ro.calls[i].hasOutput = outputText(p.Output), true
					}
				}
			}
		}
		if err != nil {
			return ro
		}
	}
}

// outputText flattens a tool output: a string, or input_text items.
func outputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var out []string
		for _, p := range parts {
			out = append(out, p.Text)
		}
		return strings.Join(out, "\n")
	}
	return string(raw)
}

var (
	routerRe = regexp.MustCompile(`ERROR codex_core::tools::router: error=(.*)`)
	// ansiRe matches terminal colour codes: the app-server colours its log
	// lines on stderr even when stderr is not a terminal.
	ansiRe = regexp.MustCompile(`\x1b\[[0-9;]*m`)
)

// routerErrors returns the messages of Codex's tool-router error lines in
// stderr, once per line (Codex logs each line twice).
func routerErrors(stderr string) []string {
	var out []string
	seen := map[string]bool{}
	for l := range strings.SplitSeq(ansiRe.ReplaceAllString(stderr, ""), "\n") {
		l = strings.TrimSpace(l)
		m := routerRe.FindStringSubmatch(l)
		if m == nil || seen[l] || userDeclined(m[1]) {
			continue
		}
		seen[l] = true
		out = append(out, strings.TrimSpace(m[1]))
	}
	return out
}

// userDeclined reports whether a router error is a call a person declined
// through the app-server (measured): those calls are visible as declined
// items, not hidden.
func userDeclined(msg string) bool {
	msg = strings.TrimSpace(msg)
	return msg == "patch rejected by user" || strings.Contains(msg, `Rejected(\"rejected by user\")`)
}

// rejectionPrefixes are the router's answers to a refused call (measured).
var rejectionPrefixes = []string{"patch rejected:", "approval policy is Never", "unsupported call:",
	"unsupported custom tool call", "rejected by user"}

func isRejection(out string, router []string) bool {
	out = strings.TrimSpace(out)
	if slices.Contains(router, out) {
		return true
	}
	for _, p := range rejectionPrefixes {
		if strings.HasPrefix(out, p) {
			return true
		}
	}
	return false
}

var exitCodeRe = regexp.MustCompile(`Process exited with code (-?\d+)`)

// sandboxKeywords are the output texts by which Codex decides a failed
// command was blocked by its sandbox (from the 0.169.0 binary).
var sandboxKeywords = []string{"operation not permitted", "permission denied", "read-only file system",
	"failed to write file", "sigsys"}

// sandboxDenied reports whether a shell call's output is one Codex treats as
// a sandbox denial: a non-zero exit and a sandbox failure text.
func sandboxDenied(out string) bool {
	m := exitCodeRe.FindStringSubmatch(out)
	if m == nil || m[1] == "0" {
		return false
	}
	lower := strings.ToLower(out)
	return slices.ContainsFunc(sandboxKeywords, func(k string) bool { return strings.Contains(lower, k) })
}

var shellNames = []string{"exec_command", "shell", "shell_command", "local_shell", "container.exec"}

// rejectedStatus is the tool status of a router rejection: a call to a tool
// the model invented is an error; everything else the router refuses
// (tools removed by drover, writes outside the sandbox, escalation) is a
// denial.
func (t *translator) rejectedStatus(out string) drover.ToolStatus {
	name, ok := strings.CutPrefix(strings.TrimSpace(out), "unsupported call: ")
	if !ok {
		return drover.ToolDenied
	}
	name = strings.TrimSpace(name)
	if slices.Contains(t.info.removed, name) ||
		(slices.Contains(shellNames, name) && slices.Contains(t.info.removed, "exec_command")) {
		return drover.ToolDenied
	}
	return drover.ToolError
}

// hiddenCalls returns tool_use + tool_result for the calls Codex did not
// print: from the rollout when there is one, else from stderr.
func (t *translator) hiddenCalls(ro *rollout, stderr string) []drover.Event {
	router := routerErrors(stderr)
	type hidden struct {
		c   rolloutCall
		st  drover.ToolStatus
		src string
	}
	var out []hidden
	if ro != nil && ro.found {
		sandboxed := t.info.tier != drover.TierAutonomous
		var candidates []int
		execCalls, execRejected := 0, 0
		for _, c := range ro.calls {
			if c.name == "exec_command" {
				execCalls++
			}
			if !c.hasOutput || t.calls.Known(c.callID) {
				continue // unanswered, or already in the stream (app-server items carry the call id)
			}
			switch {
			case isRejection(c.output, router):
				if c.name == "exec_command" {
					execRejected++
				}
				out = append(out, hidden{c, t.rejectedStatus(c.output), "router"})
			case sandboxed && c.name == "exec_command" && sandboxDenied(c.output):
				candidates = append(candidates, len(out))
				out = append(out, hidden{c, drover.ToolDenied, "sandbox"})
			}
		}
		// Only when the counts agree are the sandbox candidates the calls
		// Codex did not print; otherwise one of them was printed as a
		// failed command and is already in the stream.
		if execCalls-execRejected-len(candidates) != t.visible["exec"] {
			out = slices.DeleteFunc(out, func(h hidden) bool { return h.src == "sandbox" })
		}
	} else {
		for i, msg := range router {
			name := "unknown"
			switch {
			case strings.HasPrefix(msg, "patch rejected"):
				name = "apply_patch"
			case strings.Contains(msg, "reject command"):
				name = "exec_command"
			case strings.HasPrefix(msg, "unsupported call: "):
				name = strings.TrimSpace(strings.TrimPrefix(msg, "unsupported call: "))
			}
			out = append(out, hidden{rolloutCall{callID: fmt.Sprintf("codex-rejected-%d", i), name: name,
				input: map[string]any{}, output: msg}, t.rejectedStatus(msg), "stderr"})
		}
	}
	var evs []drover.Event
	for _, h := range out {
		t.toolUses++
		t.calls.Record(h.c.callID, h.c.name)
		use := t.Event(drover.TypeToolUse, drover.ToolUsePayload{ToolName: h.c.name, ToolUseID: h.c.callID,
			Input: h.c.input, Description: tools.Describe(h.c.name, h.c.input)})
		res := t.toolResult(h.c.callID, h.st, h.c.output)
		meta := map[string]any{"codexHidden": h.src}
		use.Metadata, res.Metadata = meta, map[string]any{"codexHidden": h.src}
		evs = append(evs, use, res)
	}
	return evs
}
