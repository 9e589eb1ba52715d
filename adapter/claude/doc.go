// Package claude is drover's adapter for Anthropic's Claude Code CLI
// (`claude -p --output-format stream-json`). Its native → UES mapping and its
// tier → flag table are in docs/adapters/claude-code.md.
package claude

const (
	// ID is the adapter id stamped on events.
	ID = "claude-code"
	// Alias is the short name accepted wherever an agent is named.
	Alias = "claude"
	// BinaryEnv names the environment variable that overrides the binary path.
	BinaryEnv = "DROVER_CLAUDE_BIN"
	// TestedVersions is the version range this adapter is proven against.
	TestedVersions = "2.1.330"
)
