package opencode

// Live runs (Request.Live set) drive `opencode acp`: the Agent Client
// Protocol on stdio, through the shared ACP conversation (adapter/acp),
// with the configuration of `opencode run` (the tier's permission rules,
// in which supervised's "ask" now reaches drover as a permission request)
// and drover's agent selected as the session's mode. The mapping and the
// quirks are in docs/adapters/opencode.md ("Live runs over ACP").

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/internal/runner"
)

// conversation returns the ACP conversation of live run req; statusFile,
// when set, is where drover's retry plugin writes the HTTP status of a
// failed model call; env is the process's environment, by which its
// session database is found.
func (a *Adapter) conversation(req drover.Request, statusFile string, env []string) *acp.Conversation {
	opts := req.Options
	cwd, addDirs := acp.Dirs(opts)
	return acp.NewConversation(a.Stamp(req), acp.Session{
		Prompt: req.Prompt, Cwd: cwd, AddDirs: addDirs, Tier: opts.EffectiveTier(), Resume: opts.Resume,
		Mode: AgentName, PartialText: opts.PartialText, Model: initModel(opts), Tools: Tools(opts),
		Live: true, OpenTimeout: acp.DefaultOpenTimeout,
	}, acpDialect(statusFile, sessionDB(env), time.Now()))
}

// acpDialect is how OpenCode 1.18.33 speaks ACP (measured, see
// docs/adapters/opencode.md):
//   - a call's name is the title of its first tool_call ("bash", "write");
//     later updates retitle it with its subject;
//   - a call its permission rules refused fails with one of denialMarkers;
//   - a failed prompt is -32603 "Internal error: <provider message>":
//     the HTTP status comes from drover's retry plugin (statusFile);
//   - a session/load of an unknown session is a session service failure;
//   - a prompt's answer has the usage of its last model response only:
//     every response's is in the session database db, in the parts
//     created since the process started (since).
func acpDialect(statusFile, db string, since time.Time) acp.Dialect {
	return acp.Dialect{
		ReadTextFile: true, WriteTextFile: true,
		ToolName:    func(c acp.Call) string { return c.Title },
		Tools:       tools,
		Denied:      func(out string) bool { return runner.ContainsAny(out, denialMarkers) },
		StatusRules: statusRules,
		// An unknown session's session/load fails as "Internal error:
		// OpenCode service failure" of the session service (measured).
		UnknownSession: func(code int, _ string, data json.RawMessage) bool {
			var d struct {
				Service string `json:"service"`
			}
			return code == -32603 && json.Unmarshal(data, &d) == nil && d.Service == "session"
		},
		FailureStatus: func() int { return statusFrom(statusFile) },
		RunUsage: func(session string) (drover.Usage, bool) {
			return runUsage(db, session, since)
		},
	}
}

// statusFrom reads the HTTP status the retry plugin wrote to file, or 0.
func statusFrom(file string) int {
	if file == "" {
		return 0
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	return n
}
