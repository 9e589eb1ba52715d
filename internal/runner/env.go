package runner

import (
	"os"
	"strings"

	"github.com/drover-run/drover/internal/secret"
)

// OwnPrefix starts the name of every variable that is drover's own
// (DROVER_TOKEN, DROVER_DB, DROVER_SERVER, DROVER_CLAUDE_BIN, …). None of
// drover's environment reaches an agent under it; what drover gives an
// agent on purpose (DROVER_RUN_ID, DROVER_SOCKET, DROVER_RUN_TOKEN) it adds
// per run (SEC-5).
const OwnPrefix = "DROVER_"

// Environ returns drover's environment as an agent process inherits it
// (SEC-5): without drover's own variables (OwnPrefix), and without the
// credentials a name or a value gives away (secret.Name: GITHUB_TOKEN,
// PGPASSWORD, …; secret.InURL: a DATABASE_URL with its password) but
// those keep says the vendor itself reads (its model provider's key). The
// proxy variables stay whatever they hold: without them an agent behind
// a proxy reaches no model. What a run sets on purpose (its endpoint's key,
// Options.Env) the adapter adds after this and always reaches the agent.
func Environ(keep func(name string) bool) []string {
	return scrub(os.Environ(), keep)
}

// scrub is Environ over env.
func scrub(env []string, keep func(name string) bool) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, value, _ := strings.Cut(kv, "=")
		if !Withheld(name, value, keep) {
			out = append(out, kv)
		}
	}
	return out
}

// Withheld reports whether drover keeps the variable name=value of its
// environment from an agent whose vendor reads the credentials keep names
// (nil: none): Environ's rule, which drover also applies to what /proc
// shows of its own environment (proc.ProtectSelf).
func Withheld(name, value string, keep func(name string) bool) bool {
	switch {
	case strings.HasPrefix(name, OwnPrefix):
		return true
	case isProxy(name):
		return false
	case secret.Name(name) || secret.InURL(value):
		return keep == nil || !keep(name)
	}
	return false
}

// isProxy reports whether name is one of the proxy variables HTTP clients
// read, in either case.
func isProxy(name string) bool {
	switch strings.ToUpper(name) {
	case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
		return true
	}
	return false
}

// Prefixes returns a keep predicate for Environ that keeps the names
// starting with one of prefixes.
func Prefixes(prefixes ...string) func(name string) bool {
	return func(name string) bool {
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
}
