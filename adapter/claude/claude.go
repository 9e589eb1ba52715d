package claude

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// dryRunTools are the only native tools offered in the dry-run tier.
var dryRunTools = []string{"Read", "Glob", "Grep"}

// Capabilities reports every option Claude Code honours; it enforces all
// four tiers, and in a run that can be answered or steered it asks for
// approvals (supervised), takes steering messages and can be interrupted.
func (a *Adapter) Capabilities() drover.Capabilities {
	return drover.Capabilities{
		MaxTurns: true, MaxBudget: true, NativeMaxTurns: true, NativeMaxBudget: true, Resume: true, Fork: true,
		AllowedTools: true, DisallowedTools: true, AddDirs: true, SystemPrompt: true,
		PartialText: true, Thinking: true, Cost: true, ConfigDir: true, Endpoint: true, APIRetries: true,
		Permissions: true, Steer: true, Interrupt: true,
		Tiers:         drover.Tiers(),
		MCPTransports: []string{"stdio", "http", "sse"},
	}
}

// Prepare builds one claude process: flags from the options, and the
// environment. With req.Live, Claude runs as a conversation (LiveArgs: the
// prompt and what passes in as stream-json on stdin); without, headless
// with the prompt on stdin (Args).
func (a *Adapter) Prepare(req drover.Request) (*runner.Launch, error) {
	live := req.Live != nil
	args, err := args(req.Options, live)
	if err != nil {
		return nil, err
	}
	env, err := a.env(req.Options)
	if err != nil {
		return nil, err
	}
	user, err := userSettingsArgs(req.Options)
	if err != nil {
		return nil, err
	}
	args = append(args, user...)
	// Written last: nothing after it can fail and leave the file behind.
	mcpArgs, cleanup, err := writeMCPConfig(req.Options, env)
	if err != nil {
		return nil, err
	}
	args = append(args, mcpArgs...)
	tr := newTranslator(a.Stamp(req), req.Options.Resume != "")
	dirs, files := writable(env)
	if live {
		return &runner.Launch{Args: args, Env: env, Translator: newConversation(tr, req.Prompt), Cleanup: cleanup, Writable: dirs, WritableFiles: files}, nil
	}
	return &runner.Launch{Args: args, Env: env, Stdin: req.Prompt, Translator: tr, Cleanup: cleanup, Writable: dirs, WritableFiles: files}, nil
}

// Adapter runs Claude Code. The zero value is not usable; call New.
type Adapter struct{ runner.Base }

var (
	_ drover.Adapter   = (*Adapter)(nil)
	_ drover.Compacter = (*Adapter)(nil)
)

// CompactPrompt is Claude Code's own compaction command: sent as the
// prompt of a turn resuming a session (-p with --resume), it compacts the
// session and reports a compact_boundary (claude-code:compact).
func (*Adapter) CompactPrompt() string { return "/compact" }

// New returns a Claude Code adapter.
func New() *Adapter {
	return runner.New(&Adapter{}, runner.Spec{ID: ID, Command: "claude", BinaryEnv: BinaryEnv, TestedVersions: []string{TestedVersions}})
}

// Args returns the claude command-line arguments for opts in a headless
// run (the prompt goes on stdin). It is exported so the flag mapping can be
// read and tested. Options.MCPServers also add --mcp-config FILE, which
// Prepare writes (see MCPConfig).
func Args(opts drover.Options) ([]string, error) { return args(opts, false) }

// LiveArgs returns the claude command-line arguments for opts in a run that
// can be answered or steered: stream-json in both directions, each message
// of drover's echoed back when Claude takes it, and in supervised the
// permission prompts on stdio (LiveTierArgs).
func LiveArgs(opts drover.Options) ([]string, error) { return args(opts, true) }

func args(opts drover.Options, live bool) ([]string, error) {
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	tierArgs, err := TierArgs(opts.EffectiveTier())
	if live {
		args = []string{"-p", "--input-format", "stream-json", "--output-format", "stream-json", "--verbose", "--replay-user-messages"}
		tierArgs, err = LiveTierArgs(opts.EffectiveTier())
	}
	if err != nil {
		return nil, err
	}
	args = append(args, tierArgs...)
	args = append(args, mcpTierArgs(opts)...)
	if opts.Model != "" {
		args = append(args, "--model", opts.Model)
	}
	if opts.MaxTurns > 0 {
		args = append(args, "--max-turns", strconv.Itoa(opts.MaxTurns))
	}
	if opts.MaxBudgetUSD > 0 {
		args = append(args, "--max-budget-usd", strconv.FormatFloat(opts.MaxBudgetUSD, 'f', -1, 64))
	}
	if tools, ok := toolsFlag(opts); ok {
		args = append(args, "--tools", strings.Join(tools, ","))
	}
	if len(opts.DisallowedTools) > 0 {
		args = append(args, "--disallowedTools", strings.Join(opts.DisallowedTools, ","))
	}
	for _, d := range opts.AddDirs {
		args = append(args, "--add-dir", d)
		if opts.EffectiveTier() == drover.TierSupervised {
			// Claude's "//" prefix makes the rule path absolute.
			args = append(args, "--allowedTools", "Edit(/"+filepath.Clean(d)+"/**)")
		}
	}
	if opts.SystemPrompt != "" {
		args = append(args, "--append-system-prompt", opts.SystemPrompt)
	}
	if opts.PartialText {
		args = append(args, "--include-partial-messages")
	}
	if opts.Resume != "" {
		args = append(args, "--resume", opts.Resume)
		if opts.Fork {
			args = append(args, "--fork-session")
		}
	}
	return args, nil
}

// toolsFlag returns the value of --tools: the tier's own tool set (if it has
// one) narrowed by opts.AllowedTools. ok is false when no --tools is needed.
func toolsFlag(opts drover.Options) (tools []string, ok bool) {
	switch opts.EffectiveTier() {
	case drover.TierSandbox:
		return []string{}, true
	case drover.TierDryRun:
		if len(opts.AllowedTools) == 0 {
			return dryRunTools, true
		}
		for _, t := range opts.AllowedTools {
			if slices.Contains(dryRunTools, t) {
				tools = append(tools, t)
			}
		}
		return tools, true
	}
	return opts.AllowedTools, len(opts.AllowedTools) > 0
}

// TierArgs returns the permission flags that enforce tier (PERM-1); the tool
// set of a tier comes from toolsFlag. The table and the measurements behind
// it are in docs/adapters/claude-code.md.
//
// Below autonomous, --setting-sources "" is always passed: Claude obeys a
// workspace's .claude/settings.local.json in -p mode, whose allow rules and
// hooks would otherwise widen any tier.
func TierArgs(tier drover.Tier) ([]string, error) {
	switch tier {
	case drover.TierSandbox, drover.TierDryRun:
		return []string{"--setting-sources", "", "--permission-mode", "dontAsk"}, nil
	case drover.TierSupervised:
		return []string{"--setting-sources", "", "--permission-mode", "dontAsk", "--allowedTools", "Edit(./**)"}, nil
	case drover.TierAutonomous:
		return []string{"--permission-mode", "bypassPermissions"}, nil
	}
	return nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf("unknown tier %q", tier)}
}

// LiveTierArgs returns the permission flags of tier in a run that can be
// answered (PERM-1, PERM-2): as TierArgs, except that supervised asks
// instead of denying: the default permission mode with Claude's questions
// sent as control requests on stdout (--permission-prompt-tool stdio),
// keeping the workspace-edit allowance, so that exactly the calls TierArgs
// denies are asked. The other tiers ask nothing: what they deny is denied.
func LiveTierArgs(tier drover.Tier) ([]string, error) {
	if tier == drover.TierSupervised {
		return []string{"--setting-sources", "", "--permission-mode", "default", "--allowedTools", "Edit(./**)",
			"--permission-prompt-tool", "stdio"}, nil
	}
	return TierArgs(tier)
}

// credentials are the inherited credentials Claude Code itself reads:
// Anthropic's key or login token, and Bedrock's and Vertex's (SEC-5).
var credentials = runner.Prefixes("ANTHROPIC_", "CLAUDE_CODE_", "AWS_", "GOOGLE_APPLICATION_CREDENTIALS", "CLOUD_ML_", "VERTEX_")

// env builds the claude process environment.
func (a *Adapter) env(opts drover.Options) ([]string, error) {
	env := runner.Environ(credentials)
	set := func(k, v string) { env = append(env, k+"="+v) }
	// drover pins and tests CLI versions; a CLI updating itself mid-fleet would
	// run untested code.
	set("DISABLE_AUTOUPDATER", "1")
	if opts.Endpoint != nil {
		set("ANTHROPIC_BASE_URL", strings.TrimSuffix(opts.Endpoint.BaseURL, "/"))
		if opts.Endpoint.APIKey != "" {
			set("ANTHROPIC_API_KEY", opts.Endpoint.APIKey)
		}
		set("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
	}
	if opts.APIRetries != nil {
		set("CLAUDE_CODE_MAX_RETRIES", strconv.Itoa(*opts.APIRetries))
	}
	if opts.EffectiveTier() == drover.TierAutonomous && os.Geteuid() == 0 {
		// Claude refuses bypassPermissions as root unless told it runs in a
		// sandbox; the caller chose the autonomous tier explicitly.
		set("IS_SANDBOX", "1")
	}
	if opts.ConfigDir != "" {
		// With an endpoint and its own key the user's login is not needed,
		// and it is not copied where it is not needed.
		seed := opts.Endpoint == nil || opts.Endpoint.APIKey == ""
		if err := seedConfigDir(opts.ConfigDir, seed); err != nil {
			return nil, &drover.Error{Code: drover.CodeAdapterError, Message: "prepare claude config dir", Err: err}
		}
		set("CLAUDE_CONFIG_DIR", opts.ConfigDir)
	}
	for k, v := range opts.Env {
		set(k, v)
	}
	return env, nil
}

// seedConfigDir creates dir and, when seed is set, copies the user's Claude
// credentials into it if it has none, so an isolated run keeps the user's
// login (ADP-7).
func seedConfigDir(dir string, seed bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil || !seed {
		return err
	}
	src := os.Getenv("CLAUDE_CONFIG_DIR")
	if src == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil
		}
		src = filepath.Join(home, ".claude")
	}
	if filepath.Clean(src) == filepath.Clean(dir) {
		return nil
	}
	const creds = ".credentials.json"
	return runner.CopyIfAbsent(filepath.Join(src, creds), filepath.Join(dir, creds))
}
