// Package builtin registers drover's built-in adapters and the ACP agents
// added by configuration. It is the one place that lists them; nothing
// registers itself from init().
package builtin

import (
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
	"github.com/drover-run/drover/internal/config"
)

// Registry returns a new registry holding every built-in adapter and,
// after them, the ACP agents configured in drover's agents file
// (config.AgentsFile; drover agents add). When that file cannot be used
// (unreadable, invalid, or naming a built-in) the registry holds the
// built-ins only, and the error, which names the file, is logged with
// slog's default logger, once per process: a configured agent is never
// left out silently. Load returns the error instead.
func Registry() *drover.Registry {
	reg, err := Load()
	if err != nil {
		if _, seen := logged.LoadOrStore(err.Error(), true); !seen {
			slog.Error("drover: the configured ACP agents are not available", "err", err)
		}
	}
	return reg
}

// logged holds the configuration errors Registry has logged.
var logged sync.Map

// Load returns a new registry as Registry does, and the error of an agents
// file that cannot be used; the registry then holds the built-ins only.
func Load() (*drover.Registry, error) {
	reg := builtins()
	path, err := config.AgentsFile()
	if err != nil {
		return reg, err
	}
	agents, err := config.LoadAgents(path)
	if err != nil {
		return reg, err
	}
	names := slices.Sorted(maps.Keys(agents))
	for _, name := range names {
		if _, taken := reg.Get(name); taken {
			return reg, fmt.Errorf("agents file %s: agent %q has the name of a built-in adapter (drover agents remove %s, then add it under another name)", path, name, name)
		}
	}
	for _, name := range names {
		must(reg.Register(acp.New(ACPAgent(name, agents[name]))))
	}
	return reg, nil
}

// IsBuiltin reports whether name is a built-in adapter's id or alias: a
// name no configured agent may have.
func IsBuiltin(name string) bool {
	_, ok := builtins().Get(name)
	return ok
}

// ACPAgent is the adapter's description of the configured agent a, named
// name.
func ACPAgent(name string, a config.Agent) acp.Agent {
	var tiers []drover.Tier
	for _, t := range a.Tiers {
		if tier, err := drover.ParseTier(string(t)); err == nil { // config.Agent.Check has refused the others
			tiers = append(tiers, tier)
		}
	}
	return acp.Agent{Name: name, Command: a.Command, Args: a.Args, Env: a.Env, TestedVersions: a.Tested,
		VersionArgs: a.VersionArgs, Tiers: tiers, OpenTimeout: a.Timeout()}
}

// builtins returns a new registry holding every built-in adapter.
func builtins() *drover.Registry {
	reg := drover.NewRegistry()
	must(reg.Register(claude.New(), claude.Alias))
	must(reg.Register(codex.New()))
	must(reg.Register(gemini.New()))
	must(reg.Register(opencode.New()))
	return reg
}

func must(err error) {
	if err != nil {
		panic(err) // built-in ids are constants, configured names checked: a clash is a programming error
	}
}
