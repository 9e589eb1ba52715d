package gemini

// Live runs (Request.Live set, no resume) drive `gemini --acp`: the
// Agent Client Protocol on stdio, through the shared ACP conversation
// (adapter/acp), so that a person, a rule or a callback can answer what
// Gemini asks. The flags, the tier policies and Gemini's ACP quirks are
// in docs/adapters/gemini.md ("Live runs over ACP").

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
)

// LiveArgs returns the command line of a live run: `gemini --acp` with
// the model, the tier's approval mode and admin policy (policyPath, ""
// when LivePolicy is empty) and the extra directories.
//
// --skip-trust: in a folder it does not trust, Gemini's ACP mode ignores
// --approval-mode and refuses session/set_mode ("Cannot enable privileged
// approval modes in an untrusted folder", measured). --debug: only then
// does Gemini 0.61.0 put a shell command's output in its tool_call_update
// (its display text is otherwise an ANSI object, which it drops); its
// debug log goes to stderr.
func LiveArgs(opts drover.Options, policyPath string) ([]string, error) {
	return runFlags([]string{"--acp", "--skip-trust", "--debug"}, opts, policyPath)
}

// LivePolicy returns the admin policy of a live run (PERM-1, PERM-2): in
// supervised, dry-run and sandbox, the tier's tools are allowed and every
// other tool is "ask_user", so that Gemini asks drover (session/
// request_permission): supervised asks a person (or a rule, a callback),
// dry-run and sandbox are rejected by drover at once. An allow-list
// denies what it leaves out; DisallowedTools are denied. Autonomous gets
// Policy's filter rules only. Why ask rather than deny below autonomous:
// a tool Gemini's policy denies is not registered, and a call to it fails
// without a word on ACP (measured), so the stream could not show the
// denial (PERM-3).
func LivePolicy(opts drover.Options) string {
	tier := opts.EffectiveTier()
	if tier == drover.TierAutonomous {
		return Policy(opts)
	}
	own := tierTools(tier)
	var b strings.Builder
	rule := func(tool, decision string, prio int) {
		fmt.Fprintf(&b, "[[rule]]\ntoolName = %q\ndecision = %q\npriority = %d\n\n", tool, decision, prio)
	}
	if len(opts.AllowedTools) == 0 {
		rule("*", "ask_user", 100)
		for _, t := range own {
			rule(t, "allow", 200)
		}
	} else {
		rule("*", "deny", 100)
		for _, t := range opts.AllowedTools {
			decision := "ask_user"
			if slices.Contains(own, t) {
				decision = "allow"
			}
			rule(t, decision, 200)
		}
	}
	for _, t := range opts.DisallowedTools {
		rule(t, "deny", 300)
	}
	return b.String()
}

// LiveTools are the native tools a live run offers the model (init's
// tools): every tool its policy does not deny, asked or not.
func LiveTools(opts drover.Options) []string {
	if opts.EffectiveTier() == drover.TierAutonomous {
		return OfferedTools(opts)
	}
	return opts.FilterTools(yoloTools)
}

// acpDialect is how Gemini 0.61.0 speaks ACP (measured, see
// docs/adapters/gemini.md):
//   - fs: drover offers writes only; with fs/read_text_file offered, every
//     new-file write fails (Gemini checks for the file through the client
//     and misreads its "not found");
//   - a call's name is the prefix of its id ("write_file__write_file_…");
//   - a call refused for where it acts ("Path not in workspace") is
//     denied, as headless;
//   - usage comes in the prompt result's _meta.quota;
//   - a failed prompt's error code is the HTTP status.
func acpDialect() acp.Dialect {
	return acp.Dialect{
		WriteTextFile: true,
		Tools:         tools,
		ToolName: func(c acp.Call) string {
			name, _, ok := strings.Cut(c.ID, "__")
			if !ok {
				return ""
			}
			return name
		},
		Denied: func(out string) bool {
			return slices.ContainsFunc(deniedPrefixes, func(p string) bool { return strings.HasPrefix(out, p) })
		},
		Usage:       quotaUsage,
		StatusRules: statusRules,
	}
}

// quotaUsage reads Gemini's usage from a prompt result's
// _meta.quota.token_count.
func quotaUsage(result json.RawMessage) (drover.Usage, bool) {
	var r struct {
		Meta struct {
			Quota struct {
				TokenCount *struct {
					InputTokens  int64 `json:"input_tokens"`
					OutputTokens int64 `json:"output_tokens"`
				} `json:"token_count"`
			} `json:"quota"`
		} `json:"_meta"`
	}
	if json.Unmarshal(result, &r) != nil || r.Meta.Quota.TokenCount == nil {
		return drover.Usage{}, false
	}
	tc := r.Meta.Quota.TokenCount
	return drover.Usage{InputTokens: tc.InputTokens, OutputTokens: tc.OutputTokens}, true
}
