package engine

import (
	"time"

	"github.com/drover-run/drover"
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
			if r.Behavior == b && r.Matches(req) {
				return r, true
			}
		}
	}
	return drover.PermissionRule{}, false
}
