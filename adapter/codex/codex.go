package codex

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/runner"
)

const (
	// DefaultEndpointModel is the model passed with -m when an Endpoint is
	// set and no Model is: a slug from Codex's bundled catalog, so Codex
	// neither warns about unknown model metadata nor changes its tool set.
	DefaultEndpointModel = "gpt-5.5"
	// APIKeyEnv is the variable the drover provider's env_key names; Codex
	// sends its value as the bearer token to Endpoint.BaseURL.
	APIKeyEnv = "DROVER_CODEX_API_KEY"
	// providerID is the model provider drover defines with -c overrides for
	// an Endpoint (Codex refuses to redefine its built-in "openai").
	providerID = "drover"
)

var uuidRe = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)

// Capabilities reports what Codex honours. Codex has no turn or budget
// limit: drover's engine enforces MaxTurns and MaxBudgetUSD (docs/limits.md).
// Permissions, Steer, Interrupt and
// PartialText need a live run (Request.Live), which drives `codex
// app-server`; `codex exec` prints agent messages only whole, so without a
// Live PartialText is refused in Prepare. APIRetries additionally needs an
// Endpoint (checked in Prepare).
func (a *Adapter) Capabilities() drover.Capabilities {
	return drover.Capabilities{
		MaxTurns: true, MaxBudget: true,
		Resume: true, AllowedTools: true, DisallowedTools: true, AddDirs: true, SystemPrompt: true,
		Thinking: true, ConfigDir: true, Endpoint: true, APIRetries: true, PartialText: true,
		Permissions: true, Steer: true, Interrupt: true,
		Tiers:         drover.Tiers(),
		MCPTransports: mcpTransports,
		// Codex runs commands in its own bubblewrap sandbox, which a
		// Landlock domain breaks (measured: bwrap cannot set up its user
		// namespace, so every command fails, reads included; its legacy
		// Landlock fallback refuses restricted file systems). In sandbox
		// nothing runs in it (no shell; patches are refused before they
		// run). A live supervised run turns it off and the kernel holds the
		// boundary: Codex reruns an approved command its sandbox blocked
		// outside the sandbox, unasked (LiveTier). Headless supervised and
		// dry-run keep it: their approval policy is "never", so nothing is
		// rerun, and it keeps their commands off the network
		// (docs/adapters/codex.md).
		Contain:     []drover.Tier{drover.TierSandbox, drover.TierAutonomous},
		ContainLive: []drover.Tier{drover.TierSupervised},
	}
}

// Prepare builds one codex process: with req.Live, `codex app-server` and
// a Conversation that drives it (appserver.go); without, `codex exec` with
// flags and -c overrides from the options, the prompt on stdin. Both get
// the same environment.
func (a *Adapter) Prepare(req drover.Request) (*runner.Launch, error) {
	opts := req.Options
	var args []string
	var err error
	if req.Live != nil {
		args, err = AppServerArgs(opts)
	} else {
		args, err = Args(opts)
	}
	if err != nil {
		return nil, err
	}
	env, home, err := a.env(opts)
	if err != nil {
		return nil, err
	}
	cwd := opts.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	if abs, err := filepath.Abs(cwd); err == nil {
		cwd = abs
	}
	info := runInfo{
		resume:    opts.Resume != "",
		model:     runner.Model(opts, DefaultEndpointModel),
		cwd:       cwd,
		tier:      opts.EffectiveTier(),
		tools:     offeredTools(opts),
		removed:   removedTools(opts),
		codexHome: home,
	}
	if req.Live != nil {
		return &runner.Launch{Args: args, Env: env, Translator: newConversation(a.Stamp(req), info, req.Prompt, opts), Writable: writable(env)}, nil
	}
	// The prompt goes on stdin (the final "-" of args): Codex reads stdin to
	// EOF before it starts, and the pipe is closed after the prompt.
	return &runner.Launch{Args: args, Env: env, Stdin: req.Prompt, Translator: newTranslator(a.Stamp(req), info), Writable: writable(env)}, nil
}

// Adapter runs the Codex CLI. The zero value is not usable; call New.
type Adapter struct{ runner.Base }

var _ drover.Adapter = (*Adapter)(nil)

// New returns a Codex adapter.
func New() *Adapter {
	return runner.New(&Adapter{}, runner.Spec{ID: ID, Command: "codex", BinaryEnv: BinaryEnv, TestedVersions: []string{TestedVersions}})
}

// Args returns the codex command-line arguments for opts (the prompt goes on
// stdin, read by the final "-"). It is exported so the flag mapping can be
// read and tested.
func Args(opts drover.Options) ([]string, error) {
	if opts.PartialText {
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "partialText: codex exec prints agent messages only whole; text deltas need a run that can be answered or steered (codex app-server)"}
	}
	if err := checkOptions(opts); err != nil {
		return nil, err
	}
	tierArgs, err := TierArgs(opts.EffectiveTier())
	if err != nil {
		return nil, err
	}
	common, err := overrides(opts)
	if err != nil {
		return nil, err
	}
	args := []string{"exec", "--json", "--skip-git-repo-check"}
	args = append(args, tierArgs...)
	if m := runner.Model(opts, DefaultEndpointModel); m != "" {
		args = append(args, "-m", m)
	}
	for _, d := range opts.AddDirs {
		args = append(args, "--add-dir", d)
	}
	args = append(args, common...)
	if opts.Resume != "" {
		// Flags must precede the subcommand: `resume` has no -s.
		args = append(args, "resume", opts.Resume)
	}
	return append(args, "-"), nil
}

// checkOptions refuses what Codex cannot do in either mode.
func checkOptions(opts drover.Options) error {
	if opts.Resume != "" && !uuidRe.MatchString(opts.Resume) {
		// `codex exec resume NAME` with a NAME that is not a thread UUID
		// silently starts a new thread; drover never hands out such tokens,
		// so one is refused rather than risk a silently fresh conversation.
		return &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: fmt.Sprintf("codex resumes only thread UUIDs; %q is not one", opts.Resume)}
	}
	if opts.APIRetries != nil && opts.Endpoint == nil {
		return &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "apiRetries needs an endpoint with codex: its built-in providers' retry counts cannot be overridden"}
	}
	return nil
}

// overrides returns the -c overrides both modes pass for opts, after their
// tier and model: the tool filter's switches, the MCP servers, the system
// prompt and the endpoint's provider.
func overrides(opts drover.Options) ([]string, error) {
	args, err := toolOverrides(opts)
	if err != nil {
		return nil, err
	}
	mcp, _, err := MCPOverrides(opts)
	if err != nil {
		return nil, err
	}
	args = append(args, mcp...)
	if opts.SystemPrompt != "" {
		// developer_instructions is added as a developer message after
		// Codex's own instructions (measured: the first content block of
		// the second developer message), i.e. appended.
		args = append(args, "-c", "developer_instructions="+tomlString(opts.SystemPrompt))
	}
	if ep := opts.Endpoint; ep != nil {
		provider := "{name=" + tomlString(providerID) +
			",base_url=" + tomlString(strings.TrimSuffix(ep.BaseURL, "/")+"/v1") +
			",wire_api=\"responses\""
		if ep.APIKey != "" {
			provider += ",env_key=" + tomlString(APIKeyEnv)
		}
		if r := opts.APIRetries; r != nil {
			n := strconv.Itoa(*r)
			provider += ",request_max_retries=" + n + ",stream_max_retries=" + n
		}
		provider += "}"
		args = append(args,
			"-c", "model_provider="+tomlString(providerID),
			"-c", "model_providers."+providerID+"="+provider,
			// Without these two Codex exports metrics to ab.chatgpt.com at
			// exit and syncs curated plugins from github.com and chatgpt.com
			// (+5 s per run offline, measured).
			"-c", "analytics.enabled=false",
			"-c", "features.plugins=false",
		)
	}
	return args, nil
}

// TierArgs returns the flags and config overrides that enforce tier
// (PERM-1). The table and the measurements behind it are in
// docs/adapters/codex.md.
//
// Below autonomous, --ignore-rules is passed: execpolicy .rules files (the
// user's or a project's) can allow commands that would otherwise be refused,
// which would widen the tier.
func TierArgs(tier drover.Tier) ([]string, error) {
	switch tier {
	case drover.TierSandbox:
		// No shell, no image viewer, no web search, no goals; apply_patch
		// cannot be removed, but the read-only sandbox rejects every patch.
		return append([]string{"-s", "read-only", "--ignore-rules"}, sandboxSwitches...), nil
	case drover.TierDryRun:
		return []string{"-s", "read-only", "--ignore-rules"}, nil
	case drover.TierSupervised:
		// workspace-write alone also lets commands and patches write to
		// /tmp and $TMPDIR (measured); a user config may open the network or
		// add writable roots. Pin all of it.
		return []string{"-s", "workspace-write", "--ignore-rules",
			"-c", "sandbox_workspace_write.network_access=false",
			"-c", "sandbox_workspace_write.exclude_slash_tmp=true",
			"-c", "sandbox_workspace_write.exclude_tmpdir_env_var=true",
			"-c", "sandbox_workspace_write.writable_roots=[]"}, nil
	case drover.TierAutonomous:
		return []string{"--dangerously-bypass-approvals-and-sandbox"}, nil
	}
	return nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf("unknown tier %q", tier)}
}

// sandboxSwitches remove every native tool Codex can remove (the sandbox
// tier, in both modes).
var sandboxSwitches = []string{"-c", "features.shell_tool=false", "-c", "features.view_image=false",
	"-c", "features.goals=false", "-c", `web_search="disabled"`}

// defaultTools are the tools Codex 0.169.0 offers the bundled models with
// the default features (measured from the request body), in its order.
var defaultTools = []string{"exec_command", "write_stdin", "request_user_input", "apply_patch", "view_image",
	"get_goal", "create_goal", "update_goal", "tool_search", "web_search"}

// toolSwitch is one config override that removes a group of tools; Codex
// can remove tools only in these groups.
type toolSwitch struct {
	tools    []string
	override string
}

var toolSwitches = []toolSwitch{
	{[]string{"exec_command", "write_stdin"}, "features.shell_tool=false"},
	{[]string{"view_image"}, "features.view_image=false"},
	{[]string{"get_goal", "create_goal", "update_goal"}, "features.goals=false"},
	{[]string{"web_search"}, `web_search="disabled"`},
}

// tierRemoved are the tool groups a tier's own flags already remove.
func tierRemoved(t drover.Tier) []string {
	if t == drover.TierSandbox {
		return []string{"exec_command", "write_stdin", "view_image", "get_goal", "create_goal", "update_goal", "web_search"}
	}
	return nil
}

// toolOverrides maps AllowedTools/DisallowedTools (ENG-013, exact names) to
// the switches that remove the filtered-out tools. A filtered-out tool Codex
// cannot remove (apply_patch, request_user_input, tool_search, or half of a
// group) refuses the run.
func toolOverrides(opts drover.Options) ([]string, error) {
	if len(opts.AllowedTools) == 0 && len(opts.DisallowedTools) == 0 {
		return nil, nil
	}
	var out []string
	tierGone := tierRemoved(opts.EffectiveTier())
	for _, sw := range toolSwitches {
		var keep, drop []string
		for _, t := range sw.tools {
			if opts.ToolAllowed(t) {
				keep = append(keep, t)
			} else {
				drop = append(drop, t)
			}
		}
		switch {
		case len(drop) == 0:
		case len(keep) > 0:
			return nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf(
				"codex can remove %s only together; the tool filter keeps %s", strings.Join(sw.tools, ", "), strings.Join(keep, ", "))}
		case !slices.Contains(tierGone, sw.tools[0]):
			out = append(out, "-c", sw.override)
		}
	}
	for _, t := range defaultTools {
		if !opts.ToolAllowed(t) && !slices.ContainsFunc(toolSwitches, func(s toolSwitch) bool { return slices.Contains(s.tools, t) }) {
			return nil, &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf(
				"codex cannot remove its %s tool; the tool filter must allow it", t)}
		}
	}
	return out, nil
}

// removedTools lists the native tools the options remove (tier and tool
// filter); a call to one of them is a denial, not a model error.
func removedTools(opts drover.Options) []string {
	gone := slices.Clone(tierRemoved(opts.EffectiveTier()))
	for _, t := range defaultTools {
		if !opts.ToolAllowed(t) && !slices.Contains(gone, t) {
			gone = append(gone, t)
		}
	}
	return gone
}

// offeredTools is the tool list reported in the synthesized init: the
// measured default set minus what the options remove.
func offeredTools(opts drover.Options) []string {
	gone := removedTools(opts)
	out := []string{}
	for _, t := range defaultTools {
		if !slices.Contains(gone, t) {
			out = append(out, t)
		}
	}
	return out
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// credentials are the inherited credentials Codex itself reads: OpenAI's
// and Azure OpenAI's keys (SEC-5).
var credentials = runner.Prefixes("OPENAI_", "CODEX_", "AZURE_OPENAI_")

// env builds the codex process environment and returns the CODEX_HOME the
// process will use (needed to read its rollout file afterwards).
func (a *Adapter) env(opts drover.Options) ([]string, string, error) {
	env := runner.Environ(credentials)
	lookup := func(k string) string {
		if v, ok := opts.Env[k]; ok {
			return v
		}
		return os.Getenv(k)
	}
	var extra []string
	set := func(k, v string) { extra = append(extra, k+"="+v) }
	if opts.Endpoint != nil && opts.Endpoint.APIKey != "" {
		set(APIKeyEnv, opts.Endpoint.APIKey)
	}
	_, mcpEnv, err := MCPOverrides(opts)
	if err != nil {
		return nil, "", err
	}
	for _, k := range slices.Sorted(maps.Keys(mcpEnv)) {
		set(k, mcpEnv[k])
	}
	home := lookup("CODEX_HOME")
	if opts.ConfigDir != "" {
		// With an endpoint and its own key the user's login is not needed,
		// and it is not copied where it is not needed.
		seed := opts.Endpoint == nil || opts.Endpoint.APIKey == ""
		if err := seedConfigDir(opts.ConfigDir, userCodexHome(), seed); err != nil {
			return nil, "", &drover.Error{Code: drover.CodeAdapterError, Message: "prepare codex config dir", Err: err}
		}
		home = opts.ConfigDir
		set("CODEX_HOME", home)
	}
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = filepath.Join(h, ".codex")
		}
	}
	if home != "" {
		home, _ = filepath.Abs(home)
		tmp := lookup("TMPDIR")
		if tmp == "" {
			tmp = "/tmp"
		}
		if abs, err := filepath.Abs(tmp); err == nil && contain.Within(home, abs) {
			// Codex refuses to create its sandbox helper links under a
			// temporary directory that contains CODEX_HOME and warns on
			// every run; a TMPDIR inside CODEX_HOME is not its parent.
			dir := filepath.Join(home, ".tmp")
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, "", &drover.Error{Code: drover.CodeAdapterError, Message: "prepare codex TMPDIR", Err: err}
			}
			set("TMPDIR", dir)
		}
	}
	for k, v := range opts.Env {
		// What drover set itself (ConfigDir's CODEX_HOME, the moved TMPDIR)
		// wins: the translator reads the rollout from that CODEX_HOME.
		if (k == "TMPDIR" || k == "CODEX_HOME") && slices.ContainsFunc(extra, func(e string) bool { return strings.HasPrefix(e, k+"=") }) {
			continue
		}
		set(k, v)
	}
	return append(env, extra...), home, nil
}

// userCodexHome is the user's own Codex home: $CODEX_HOME or ~/.codex.
func userCodexHome() string {
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return h
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(h, ".codex")
}

// seedFiles are copied from the user's Codex home into a run's own one:
// the login (auth.json) and the provider settings (config.toml).
var seedFiles = []string{"auth.json", "config.toml"}

// seedConfigDir creates dir and, when seed is set, copies the user's Codex
// login and config from src into it where it has none, so an isolated run
// keeps the user's login and provider (ADP-7).
func seedConfigDir(dir, src string, seed bool) error {
	if err := os.MkdirAll(dir, 0o700); err != nil || !seed || src == "" {
		return err
	}
	if a, b := filepath.Clean(src), filepath.Clean(dir); a == b {
		return nil
	}
	for _, name := range seedFiles {
		if err := runner.CopyIfAbsent(filepath.Join(src, name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return nil
}
