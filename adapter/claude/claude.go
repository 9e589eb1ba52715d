// Package claude is drover's adapter for Anthropic's Claude Code CLI
// (`claude -p --output-format stream-json`). Its native → UES mapping and its
// tier → flag table are in docs/adapters/claude-code.md.
package claude

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/runner"
)

const (
	// ID is the adapter id stamped on events.
	ID = "claude-code"
	// Alias is the short name accepted wherever an agent is named.
	Alias = "claude"
	// BinaryEnv names the environment variable that overrides the binary path.
	BinaryEnv = "DROVER_CLAUDE_BIN"
	// TestedVersions is the version range this adapter is proven against.
	TestedVersions = "2.1.330"
)

var testedVersions = []string{"2.1.330"}

// Adapter runs Claude Code. The zero value is not usable; call New.
type Adapter struct {
	linger time.Duration
	grace  time.Duration
}

var (
	_ drover.Adapter = (*Adapter)(nil)
	_ runner.Vendor  = (*Adapter)(nil)
)

// New returns a Claude Code adapter.
func New() *Adapter {
	return &Adapter{linger: 2 * time.Second, grace: 3 * time.Second}
}

// ID returns "claude-code".
func (a *Adapter) ID() string { return ID }

// Capabilities reports every option Claude Code honours; it enforces all four tiers.
func (a *Adapter) Capabilities() drover.Capabilities {
	return drover.Capabilities{
		Tiers:    drover.Tiers(),
		MaxTurns: true, MaxBudget: true, Resume: true, Fork: true,
		AllowedTools: true, DisallowedTools: true, AddDirs: true, SystemPrompt: true,
		PartialText: true, Thinking: true, Cost: true, ConfigDir: true, Endpoint: true, APIRetries: true,
	}
}

// Available runs `claude --version` (ADP-4).
func (a *Adapter) Available(ctx context.Context) drover.Availability {
	return runner.Available(ctx, func() (string, error) { return a.Binary(drover.Options{}) }, []string{"--version"}, testedVersions)
}

// Run starts claude and yields its events. See drover.Adapter for the contract.
func (a *Adapter) Run(ctx context.Context, req drover.Request) iter.Seq2[drover.Event, error] {
	return func(yield func(drover.Event, error) bool) {
		runner.Run(ctx, a, req, runner.Settings{Linger: a.linger, Grace: a.grace}, yield)
	}
}

// Binary finds claude: Options.Binary, DROVER_CLAUDE_BIN, or PATH.
func (a *Adapter) Binary(opts drover.Options) (string, error) {
	if opts.Binary != "" {
		return opts.Binary, nil
	}
	return proc.LookPath("claude", BinaryEnv)
}

// Prepare builds one claude process: flags from the options, the prompt on
// stdin, and the environment.
func (a *Adapter) Prepare(_ string, req drover.Request) (*runner.Launch, error) {
	args, err := Args(req.Options)
	if err != nil {
		return nil, err
	}
	env, err := a.env(req.Options)
	if err != nil {
		return nil, err
	}
	return &runner.Launch{
		Spec:       proc.Spec{Args: args, Env: env, Dir: req.Options.Cwd, Stdin: strings.NewReader(req.Prompt)},
		Translator: newTranslator(req.Options.SessionID, time.Now, req.Options.Resume != ""),
	}, nil
}

// Args returns the claude command-line arguments for opts (the prompt goes on
// stdin). It is exported so the flag mapping can be read and tested.
func Args(opts drover.Options) ([]string, error) {
	args := []string{"-p", "--output-format", "stream-json", "--verbose"}
	tierArgs, err := TierArgs(opts.EffectiveTier())
	if err != nil {
		return nil, err
	}
	args = append(args, tierArgs...)
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

// dryRunTools are the only native tools offered in the dry-run tier.
var dryRunTools = []string{"Read", "Glob", "Grep"}

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

// env builds the claude process environment.
func (a *Adapter) env(opts drover.Options) ([]string, error) {
	env := os.Environ()
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
	dst := filepath.Join(dir, ".credentials.json")
	if _, err := os.Stat(dst); err == nil {
		return nil
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
	in, err := os.Open(filepath.Join(src, ".credentials.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
