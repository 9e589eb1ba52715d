// Package codex is drover's adapter for OpenAI's Codex CLI
// (`codex exec --json`). Its native → UES mapping, its tier → flag table and
// the measurements behind them are in docs/adapters/codex.md.
package codex

const (
	// ID is the adapter id stamped on events.
	ID = "codex"
	// BinaryEnv names the environment variable that overrides the binary path.
	BinaryEnv = "DROVER_CODEX_BIN"
	// TestedVersions is the version range this adapter is proven against.
	TestedVersions = "0.169.0"
)
