package runs

import (
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// Redacted is the text that replaces a secret in what drover records or
// shows of a run's options.
const Redacted = "[redacted]"

// secretWords are the words of an environment variable or header name
// (split at "_" and "-") that say its value is a credential.
var secretWords = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL",
	"CREDENTIALS", "AUTH", "AUTHORIZATION", "COOKIE", "PAT", "PRIVATE"}

// IsSecretName reports whether an environment variable or header named
// name holds a credential by its words: OPENAI_API_KEY, GITHUB_TOKEN,
// Authorization, X-Api-Key, ANTHROPIC_AUTH_TOKEN (but not GIT_AUTHOR_NAME).
// A secret inside another value (a password in a DATABASE_URL) is not
// recognised.
func IsSecretName(name string) bool {
	for _, w := range strings.FieldsFunc(strings.ToUpper(name), func(r rune) bool { return r == '_' || r == '-' || r == '.' }) {
		if slices.Contains(secretWords, w) {
			return true
		}
	}
	return false
}

// Redact returns a copy of o fit to record and show (SEC-3): the
// endpoint's API key, the values of environment variables and MCP server
// environment and headers whose names say they hold a credential, and
// every value of a failover profile's environment, are replaced by
// Redacted. o itself is unchanged; runs use it as it is.
func Redact(o drover.Options) drover.Options {
	redactMap := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			if IsSecretName(k) && v != "" {
				v = Redacted
			}
			out[k] = v
		}
		return out
	}
	if o.Endpoint != nil {
		ep := *o.Endpoint
		if ep.APIKey != "" {
			ep.APIKey = Redacted
		}
		o.Endpoint = &ep
	}
	o.Env = redactMap(o.Env)
	if o.MCPServers != nil {
		servers := make(map[string]drover.MCPServer, len(o.MCPServers))
		for name, m := range o.MCPServers {
			m.Env, m.Headers = redactMap(m.Env), redactMap(m.Headers)
			servers[name] = m
		}
		o.MCPServers = servers
	}
	if o.Failover != nil {
		o.Failover = redactFailover(o.Failover)
	}
	return o
}

// redacted returns a copy of f with every profile's Env value replaced by
// Redacted.
func redactFailover(f *drover.Failover) *drover.Failover {
	out := &drover.Failover{Models: slices.Clone(f.Models), Agents: slices.Clone(f.Agents)}
	for _, p := range f.Profiles {
		if p.Env != nil {
			env := make(map[string]string, len(p.Env))
			for k := range p.Env {
				env[k] = Redacted
			}
			p.Env = env
		}
		out.Profiles = append(out.Profiles, p)
	}
	return out
}
