// Package gemini is drover's adapter for Google's Gemini CLI
// (`gemini --output-format stream-json`, prompt on stdin). Its native → UES
// mapping and its tier → flag table are in docs/adapters/gemini.md.
package gemini

const (
	// ID is the adapter id stamped on events.
	ID = "gemini"
	// BinaryEnv names the environment variable that overrides the binary path.
	BinaryEnv = "DROVER_GEMINI_BIN"
	// TestedVersions is the version this adapter is proven against.
	TestedVersions = "0.61.0"
)
