package drover

import (
	"fmt"
	"slices"
)

// Profile is a named set of credentials for an agent (FAIL-1): environment
// variables (an API key), or a vendor configuration home holding a login.
// Its Env values are secrets: Options.Redacted replaces every one of them,
// so they never reach the ledger, events or API responses (SEC-3).
type Profile struct {
	// Name names the profile in events, cooldowns and the ledger.
	Name string `json:"name"`
	// Agent is the agent (id or alias) the credentials are for; empty
	// means any agent.
	Agent string `json:"agent,omitempty"`
	// Env is added to the vendor process environment over Options.Env.
	Env map[string]string `json:"env,omitempty"`
	// ConfigDir, when set, is the vendor configuration home the attempt
	// runs with (Options.ConfigDir): a home the user logged in to.
	ConfigDir string `json:"configDir,omitempty"`
}

// Failover is a run's failover chain (FAIL-1): the credential profiles,
// models and agents to try when an attempt fails retryably before any tool
// ran. Attempts go profile by profile, then model by model, then agent by
// agent: the run's agent with Options.Model, then with each of Models; then
// each of Agents with its default model. Each agent is tried with every
// profile for it (Profile.Agent names it or is empty), in order, or with
// the run's own credentials when none is for it.
type Failover struct {
	// Profiles are the credential profiles, in the order they are tried.
	Profiles []Profile `json:"profiles,omitempty"`
	// Models are the models tried after Options.Model, with the run's agent.
	Models []string `json:"models,omitempty"`
	// Agents are the agents (ids or aliases) tried after the run's agent.
	Agents []string `json:"agents,omitempty"`
}

// validate checks what holds for every chain.
func (f *Failover) validate() error {
	seen := map[string]bool{}
	for _, p := range f.Profiles {
		switch {
		case p.Name == "":
			return &Error{Code: CodeValidation, Message: "failover: a profile has no name"}
		case seen[p.Name]:
			return &Error{Code: CodeValidation, Message: fmt.Sprintf("failover: profile %q named twice", p.Name)}
		}
		seen[p.Name] = true
	}
	if slices.Contains(f.Models, "") {
		return &Error{Code: CodeValidation, Message: "failover: an empty model name"}
	}
	if slices.Contains(f.Agents, "") {
		return &Error{Code: CodeValidation, Message: "failover: an empty agent name"}
	}
	return nil
}

// MetaSessionCostUSD is the metadata key of a done event by which an
// adapter says that the vendor reported the cost as the running total of
// the session the run resumed (Claude Code), not the run's own.
const MetaSessionCostUSD = "sessionCostUsd"

// MetaRetryAfterMs is the metadata key of an error event by which an
// adapter reports the vendor's retry-after, in milliseconds; failover
// cools the profile down for that long instead of CooldownFor.
const MetaRetryAfterMs = "retryAfterMs"
