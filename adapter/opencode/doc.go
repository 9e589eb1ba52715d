// Package opencode is drover's adapter for OpenCode (`opencode run --format
// json`). Its native → UES mapping, its tier → permission table and the
// measurements behind them are in docs/adapters/opencode.md.
package opencode

const (
	// ID is the adapter id stamped on events.
	ID = "opencode"
	// BinaryEnv names the environment variable that overrides the binary path.
	BinaryEnv = "DROVER_OPENCODE_BIN"
	// TestedVersions is the version range this adapter is proven against.
	TestedVersions = "1.18.33"
)
