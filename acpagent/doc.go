// Package acpagent makes drover an agent of the Agent Client Protocol
// (ACP-2): an editor that speaks ACP (Zed, or any ACP client) reaches every
// agent drover runs — Claude Code, Codex, Gemini CLI, OpenCode — through
// one ACP agent, with drover's tiers, sessions and ledger. docs/acp.md is
// the user's view and holds the mapping tables.
//
// An ACP session is a drover session (LED-4) with the same id: each
// session/prompt starts one run through runs.Supervisor, continuing the
// session, and the run's events go back to the editor as session/update
// notifications; its permission requests become session/request_permission
// requests the editor answers. session/load replays a session from the
// ledger, so an editor can reopen any drover session, also one started by
// 'drover run'.
//
// Serve speaks ACP over any reader and writer (stdin and stdout for
// 'drover acp'), with github.com/coder/acp-go-sdk's agent-side connection.
package acpagent
