package runs

import (
	"slices"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/secret"
)

// Redacted is the text that replaces a secret in what drover records or
// shows of a run's options.
const Redacted = "[redacted]"

// Redact returns a copy of o fit to record and show (SEC-3): the
// endpoint's API key, the values of environment variables and MCP server
// environment and headers whose names say they hold a credential or whose
// value is a URL with a password (internal/secret), and every value of a
// failover profile's environment, are replaced by
// Redacted. o itself is unchanged; runs use it as it is.
func Redact(o drover.Options) drover.Options {
	redactMap := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			if v != "" && (secret.Name(k) || secret.InURL(v)) {
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

// Unredact returns options recorded by Redact as a new run may take them
// again (drover revise): every value Redact replaced is left out — an
// endpoint's key, variables, MCP servers' variables and headers — and a
// failover profile keeps only its name, for the service to fill in from
// its own profiles.
func Unredact(o drover.Options) drover.Options {
	drop := func(m map[string]string) map[string]string {
		if m == nil {
			return nil
		}
		out := make(map[string]string, len(m))
		for k, v := range m {
			if v != Redacted {
				out[k] = v
			}
		}
		return out
	}
	if o.Endpoint != nil && o.Endpoint.APIKey == Redacted {
		ep := *o.Endpoint
		ep.APIKey = ""
		o.Endpoint = &ep
	}
	o.Env = drop(o.Env)
	if o.MCPServers != nil {
		servers := make(map[string]drover.MCPServer, len(o.MCPServers))
		for name, m := range o.MCPServers {
			m.Env, m.Headers = drop(m.Env), drop(m.Headers)
			servers[name] = m
		}
		o.MCPServers = servers
	}
	if o.Failover != nil {
		f := *o.Failover
		f.Profiles = slices.Clone(f.Profiles)
		for i := range f.Profiles {
			if len(drop(f.Profiles[i].Env)) == 0 {
				f.Profiles[i].Env = nil
			}
		}
		o.Failover = &f
	}
	return o
}
