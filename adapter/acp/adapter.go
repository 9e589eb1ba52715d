package acp

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// DefaultOpenTimeout is how long an agent may take, by default, to answer
// initialize and start its session before it is stopped: ACP agents
// measured answer within 3 s (Gemini CLI, OpenCode), more under load.
const DefaultOpenTimeout = time.Minute

// Agent is an ACP agent drover runs by configuration (ACP-1): how to start
// it and what drover trusts it with.
type Agent struct {
	// Name is the adapter id: stamped on events, chosen with -a.
	Name string
	// Command is the executable: a path, or a name looked up on PATH
	// (BinaryEnv(Name) overrides it, Options.Binary both).
	Command string
	// Args are its arguments: what makes it speak ACP on stdio.
	Args []string
	// Env is added to its environment (Options.Env after it).
	Env map[string]string
	// TestedVersions are the versions the configuration vouches for
	// (ADP-4); Available marks only these tested.
	TestedVersions []string
	// VersionArgs make it print its version; nil means --version.
	VersionArgs []string
	// Tiers are the tiers the agent is trusted to enforce: it asks
	// (session/request_permission) before every tool call the tier does not
	// allow outright, and drover answers for the tier. Empty means
	// autonomous only: drover cannot know what an agent does unasked.
	Tiers []drover.Tier
	// OpenTimeout bounds how long it may take to answer initialize and
	// start its session; 0 means DefaultOpenTimeout.
	OpenTimeout time.Duration
}

// BinaryEnv is the environment variable that overrides where the agent
// name is found: DROVER_<NAME>_BIN, the name upper-cased with every other
// character than a letter or digit as "_".
func BinaryEnv(name string) string {
	b := []byte(strings.ToUpper(name))
	for i, ch := range b {
		if (ch < 'A' || ch > 'Z') && (ch < '0' || ch > '9') {
			b[i] = '_'
		}
	}
	return "DROVER_" + string(b) + "_BIN"
}

// Adapter runs one configured ACP agent. The zero value is not usable;
// call New.
type Adapter struct {
	runner.Base
	agent Agent
}

var _ drover.Adapter = (*Adapter)(nil)

// New returns the adapter of agent a.
func New(a Agent) *Adapter {
	return runner.New(&Adapter{agent: a}, runner.Spec{ID: a.Name, Command: a.Command, BinaryEnv: BinaryEnv(a.Name),
		VersionArgs: a.VersionArgs, TestedVersions: a.TestedVersions})
}

// Capabilities reports what drover can honour with any ACP agent: resume
// (session/load, refused at run time by an agent that does not offer it),
// partial text, thinking, permission requests, interrupts (session/cancel)
// and MCP servers (stdio always; http and sse where the agent advertises
// them, checked at initialize), in the tiers the configuration trusts the
// agent with. Model, turn and budget limits, tool filters, extra
// directories, system prompts, config homes, endpoints and API retries
// are the agent's own business and are refused; so is steering, which ACP
// v1 lacks.
func (a *Adapter) Capabilities() drover.Capabilities {
	tiers := slices.Clone(a.agent.Tiers)
	if len(tiers) == 0 {
		tiers = []drover.Tier{drover.TierAutonomous}
	}
	return drover.Capabilities{
		Tiers: tiers, MaxTurns: true, MaxBudget: true, Resume: true, PartialText: true, Thinking: true, Permissions: true, Interrupt: true,
		MCPTransports: []string{"stdio", "http", "sse"},
	}
}

// credentials are the inherited credentials an ACP agent gets, not knowing
// which it reads: the model providers' keys and logins of the vendors
// drover knows, and any …_API_KEY (SEC-5). Others reach it through
// Agent.Env or Options.Env.
func credentials(name string) bool {
	return strings.HasSuffix(name, "_API_KEY") || vendorCredentials(name)
}

var vendorCredentials = runner.Prefixes("ANTHROPIC_", "CLAUDE_CODE_", "OPENAI_", "CODEX_", "GEMINI_", "GOOGLE_")

// Prepare builds one run of the agent: its command line and environment,
// and the conversation. Options.Model is refused: ACP v1 has no way to
// choose a model; the agent's own command line or configuration does.
func (a *Adapter) Prepare(req drover.Request) (*runner.Launch, error) {
	opts := req.Options
	if opts.Model != "" {
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "model is not supported by " + a.ID() + ": an ACP agent's model is set in its own configuration"}
	}
	cwd, _ := Dirs(opts)
	env := runner.Environ(credentials)
	for _, m := range []map[string]string{a.agent.Env, opts.Env} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			env = append(env, k+"="+m[k])
		}
	}
	timeout := a.agent.OpenTimeout
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	conv := NewConversation(a.Stamp(req), Session{
		Prompt: req.Prompt, Cwd: cwd, Tier: opts.EffectiveTier(), Resume: opts.Resume, PartialText: opts.PartialText,
		MCPServers: opts.MCPServers, Live: req.Live != nil, OpenTimeout: timeout,
	}, Dialect{ReadTextFile: true, WriteTextFile: true})
	return &runner.Launch{Args: slices.Clone(a.agent.Args), Env: env, Translator: conv, Converse: true, OpenTimeout: timeout}, nil
}

// Dirs returns the run's working directory and extra directories as
// absolute paths: Options.Cwd (drover's own when empty) and AddDirs
// (relative ones taken from the working directory).
func Dirs(opts drover.Options) (cwd string, addDirs []string) {
	under := func(base, p string) string {
		if filepath.IsAbs(p) {
			return filepath.Clean(p)
		}
		return filepath.Join(base, p)
	}
	wd, _ := os.Getwd()
	cwd = under(wd, opts.Cwd)
	for _, d := range opts.AddDirs {
		addDirs = append(addDirs, under(cwd, d))
	}
	return cwd, addDirs
}
