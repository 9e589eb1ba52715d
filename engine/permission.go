package engine

import (
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/readonly"
)

// DefaultApprovalTimeout is how long a permission request waits for an
// answer when a CanUseTool callback is set and Options.ApprovalTimeout is
// not.
const DefaultApprovalTimeout = 5 * time.Minute

// decideByRules returns the first rule that decides req: deny rules before
// allow rules, so a deny anywhere in the list wins.
func decideByRules(rules []drover.PermissionRule, req drover.PermissionRequestPayload) (drover.PermissionRule, bool) {
	for _, b := range []drover.Behavior{drover.Deny, drover.Allow} {
		for _, r := range rules {
			if r.Behavior == b && matches(r, req) {
				return r, true
			}
		}
	}
	return drover.PermissionRule{}, false
}

// matches reports whether rule r applies to req: its tool, and its
// pattern matched against the call's subject (drover.CallSubject).
func matches(r drover.PermissionRule, req drover.PermissionRequestPayload) bool {
	if r.Tool != "*" && r.Tool != req.ToolName {
		return false
	}
	return r.Pattern == "" || globMatch(r.Pattern, drover.CallSubject(req.Input))
}

// globMatch matches s against pattern, where '*' is any run of characters
// and '?' any one character.
func globMatch(pattern, s string) bool {
	p, t := []rune(pattern), []rune(s)
	// Iterative matching with one backtrack point: linear in practice and
	// never exponential, whatever the pattern.
	pi, ti, star, mark := 0, 0, -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// ReadOnlyRule is the detail of the answer that allows a read-only
// command in the supervised tier (SUP-1): the built-in rule that gives
// `supervised` one meaning on every vendor.
const ReadOnlyRule = "read-only command (supervised)"

// readOnlyCommand reports whether input is a shell call's (its "command",
// a string or an argument vector) that only reads (readonly.Command).
// Every vendor's shell tool names its command so.
func readOnlyCommand(input map[string]any) bool {
	switch c := input["command"].(type) {
	case string:
		return readonly.Command(c)
	case []any:
		argv := make([]string, len(c))
		for i, a := range c {
			s, ok := a.(string)
			if !ok {
				return false
			}
			argv[i] = s
		}
		return readonly.Argv(argv)
	}
	return false
}
