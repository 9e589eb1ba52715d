package gemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/internal/runner"
)

// DefaultEndpointModel is the model used when an Endpoint is set and no
// Model is given: naming one skips Gemini's routing classifier call (model
// "auto"), which a gateway or fake server need not implement.
const DefaultEndpointModel = "gemini-2.5-flash"

// Native tool names of Gemini CLI 0.61.0, as offered to the model (measured
// from the request's functionDeclarations).
var (
	// readTools are the read-only tools: the dry-run tier's set.
	readTools = []string{"list_directory", "read_file", "grep_search", "glob"}
	// editTools are the file-editing tools the supervised tier adds.
	editTools = []string{"replace", "write_file"}
	// yoloTools is everything offered with --approval-mode yolo and no MCP servers.
	yoloTools = []string{"update_topic", "list_directory", "read_file", "grep_search", "glob", "replace",
		"write_file", "web_fetch", "run_shell_command", "list_background_processes", "read_background_output",
		"google_web_search", "write_todos", "enter_plan_mode", "invoke_agent", "activate_skill"}
)

// Capabilities reports the options Gemini CLI honours. MaxTurns is
// Gemini's own model.maxSessionTurns; MaxBudgetUSD is drover's engine's
// (Gemini reports no cost; docs/limits.md). SystemPrompt (GEMINI_SYSTEM_MD replaces the whole system
// prompt instead of appending), Fork and thinking output (thought parts are
// dropped from stream-json) are not supported. Permissions and Interrupt
// are a live run's (Request.Live), which drives `gemini --acp` (acp.go);
// ACP v1 has no steering.
func (a *Adapter) Capabilities() drover.Capabilities {
	return drover.Capabilities{
		MaxTurns: true, NativeMaxTurns: true, MaxBudget: true, Resume: true, AllowedTools: true, DisallowedTools: true, AddDirs: true, PartialText: true,
		ConfigDir: true, Endpoint: true, APIRetries: true, Permissions: true, Interrupt: true,
		Tiers:         drover.Tiers(),
		MCPTransports: mcpTransports,
	}
}

// Prepare builds one gemini process: a per-run temporary directory (the tier's
// policy file, TMPDIR, and the config home when one is needed and no
// ConfigDir is given), flags, settings, environment and the prompt on stdin;
// with req.Live, `gemini --acp` and an ACP conversation instead (acp.go).
// A live run that resumes runs headless with --resume: Gemini 0.61.0's ACP
// session/load always fails (and leaves the session unreadable), while
// --resume continues a session ACP started; such a run asks nothing (what
// needs approval is not offered) and cannot be interrupted.
func (a *Adapter) Prepare(req drover.Request) (l *runner.Launch, err error) {
	opts := req.Options
	live := req.Live != nil && opts.Resume == ""
	if err := checkMCP(opts); err != nil {
		return nil, err
	}
	home, temp := homeFor(opts)
	if temp && opts.Resume != "" {
		// Gemini keeps sessions under its home; a fresh temporary home has none.
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "gemini: resume with endpoint, maxTurns, apiRetries or mcpServers needs configDir (sessions live in the config home)"}
	}
	tmp, err := os.MkdirTemp("", "drover-gemini-")
	if err != nil {
		return nil, &drover.Error{Code: drover.CodeAdapterError, Message: "gemini: temporary directory", Err: err}
	}
	cleanup := func() { os.RemoveAll(tmp) }
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	if temp {
		home = filepath.Join(tmp, "home")
	}
	fail := func(what string, err error) error {
		return &drover.Error{Code: drover.CodeAdapterError, Message: "gemini: " + what, Err: err}
	}
	if home != "" {
		if err := prepareHome(home, opts); err != nil {
			return nil, fail("prepare config home", err)
		}
	}
	pol := Policy(opts)
	if live {
		pol = LivePolicy(opts)
	}
	pol += mcpRules(opts)
	policyPath := ""
	if pol != "" {
		policyPath = filepath.Join(tmp, "policy.toml")
		if err := os.WriteFile(policyPath, []byte(pol), 0o600); err != nil {
			return nil, fail("write policy", err)
		}
	}
	cwd, addDirs := acp.Dirs(opts)
	if live {
		args, err := LiveArgs(opts, policyPath)
		if err != nil {
			return nil, err
		}
		conv := acp.NewConversation(a.Stamp(req), acp.Session{
			Prompt: req.Prompt, Cwd: cwd, AddDirs: addDirs, Tier: opts.EffectiveTier(), PartialText: opts.PartialText,
			Model: runner.Model(opts, DefaultEndpointModel), Tools: LiveTools(opts), Live: true, OpenTimeout: acp.DefaultOpenTimeout,
		}, acpDialect())
		e := env(opts, home, tmp)
		return &runner.Launch{Args: args, Env: e, Translator: conv, Converse: true,
			OpenTimeout: acp.DefaultOpenTimeout, Cleanup: cleanup, Writable: writable(e, tmp)}, nil
	}
	args, err := Args(opts, policyPath)
	if err != nil {
		return nil, err
	}
	e := env(opts, home, tmp)
	return &runner.Launch{
		Args: args, Env: e, Stdin: req.Prompt, Writable: writable(e, tmp),
		Translator: newTranslator(a.Stamp(req), translatorConfig{
			resume: opts.Resume != "", partial: opts.PartialText, cwd: cwd, model: runner.Model(opts, DefaultEndpointModel), tools: OfferedTools(opts)}),
		Cleanup: cleanup,
	}, nil
}

// Adapter runs Gemini CLI. The zero value is not usable; call New.
type Adapter struct{ runner.Base }

var _ drover.Adapter = (*Adapter)(nil)

// New returns a Gemini CLI adapter.
func New() *Adapter {
	return runner.New(&Adapter{}, runner.Spec{ID: ID, Command: "gemini", BinaryEnv: BinaryEnv, TestedVersions: []string{TestedVersions}})
}

// homeFor decides the Gemini config home (GEMINI_CLI_HOME): ConfigDir when
// given; else, when the run needs settings of its own (endpoint, turn limit,
// retries, MCP servers), a temporary one (temp = true) seeded with the
// user's settings, so the user's ~/.gemini/settings.json is never
// rewritten; else "" = the user's own home, untouched.
func homeFor(opts drover.Options) (home string, temp bool) {
	if opts.ConfigDir != "" {
		return opts.ConfigDir, false
	}
	if opts.Endpoint != nil || opts.MaxTurns > 0 || opts.APIRetries != nil || len(opts.MCPServers) > 0 {
		return "", true
	}
	return "", false
}

// Args returns the gemini command-line arguments for opts; policyPath is the
// tier's admin policy file ("" when none is needed). The prompt goes on stdin:
// with stdin not a TTY and no -p, gemini runs headless and reads it to EOF.
func Args(opts drover.Options, policyPath string) ([]string, error) {
	// --skip-trust: headless gemini refuses (exit 55) to run in a folder the
	// user has not trusted; the tier policy, not folder trust, bounds the run.
	args, err := runFlags([]string{"--output-format", "stream-json", "--skip-trust"}, opts, policyPath)
	if err != nil || opts.Resume == "" {
		return args, err
	}
	return append(args, "--resume", opts.Resume), nil
}

// runFlags returns mode's flags followed by those every gemini run gets:
// the model, the tier's approval mode and admin policy (policyPath, "" for
// none), the extra directories.
func runFlags(mode []string, opts drover.Options, policyPath string) ([]string, error) {
	approval, err := ApprovalMode(opts.EffectiveTier())
	if err != nil {
		return nil, err
	}
	args := mode
	if m := runner.Model(opts, DefaultEndpointModel); m != "" {
		args = append(args, "-m", m)
	}
	args = append(args, "--approval-mode", approval)
	if policyPath != "" {
		args = append(args, "--admin-policy", policyPath)
	}
	for _, d := range opts.AddDirs {
		args = append(args, "--include-directories", d)
	}
	return args, nil
}

// ApprovalMode returns gemini's --approval-mode for tier (PERM-1). The tool
// set of a tier is enforced by the admin policy from Policy; the table and
// its measurements are in docs/adapters/gemini.md.
func ApprovalMode(tier drover.Tier) (string, error) {
	switch tier {
	case drover.TierSandbox, drover.TierDryRun:
		return "default", nil
	case drover.TierSupervised:
		return "auto_edit", nil
	case drover.TierAutonomous:
		return "yolo", nil
	}
	return "", &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf("unknown tier %q", tier)}
}

// tierTools is the allowlist of a tier; nil = every tool (autonomous).
func tierTools(tier drover.Tier) []string {
	switch tier {
	case drover.TierSandbox:
		return []string{}
	case drover.TierDryRun:
		return slices.Clone(readTools)
	case drover.TierSupervised:
		return slices.Concat(readTools, editTools)
	}
	return nil
}

// allowed returns the tools the run may use: the tier's allowlist narrowed by
// AllowedTools, minus DisallowedTools; nil = no allowlist (autonomous with
// no AllowedTools).
func allowed(opts drover.Options) []string {
	allow := tierTools(opts.EffectiveTier())
	if len(opts.AllowedTools) > 0 {
		if allow == nil {
			allow = slices.Clone(opts.AllowedTools)
		} else {
			allow = slices.DeleteFunc(allow, func(t string) bool { return !slices.Contains(opts.AllowedTools, t) })
		}
	}
	if allow == nil {
		return nil
	}
	return slices.DeleteFunc(allow, func(t string) bool { return slices.Contains(opts.DisallowedTools, t) })
}

// OfferedTools are the native tools gemini offers the model under opts, as
// reported in the synthesized init (gemini's own init lists none).
func OfferedTools(opts drover.Options) []string {
	if allow := allowed(opts); allow != nil {
		return allow
	}
	return opts.FilterTools(yoloTools)
}

// Policy returns the TOML of the admin policy that enforces the tier and the
// tool filter (ENG-013), or "" when none is needed (autonomous, no filter).
//
// Why an admin policy: it is the highest policy tier, above the user's and
// the workspace's policies and above settings-derived rules such as a
// workspace's tools.allowed (measured: a workspace .gemini/settings.json with
// tools.allowed ["run_shell_command"] runs shell under plain auto_edit, and
// is refused with this policy). A tool denied here is not even registered,
// so a call to it fails with tool_not_registered.
func Policy(opts drover.Options) string {
	var b strings.Builder
	rule := func(tool, decision string, prio int) {
		fmt.Fprintf(&b, "[[rule]]\ntoolName = %q\ndecision = %q\npriority = %d\n\n", tool, decision, prio)
	}
	if allow := allowed(opts); allow != nil {
		rule("*", "deny", 100)
		for _, t := range allow {
			rule(t, "allow", 200)
		}
	}
	for _, t := range opts.DisallowedTools {
		rule(t, "deny", 300)
	}
	return b.String()
}

// credentials are the inherited credentials Gemini CLI itself reads: the
// Gemini API's and Google Cloud's (SEC-5).
var credentials = runner.Prefixes("GEMINI_", "GOOGLE_")

// env builds the gemini process environment.
func env(opts drover.Options, home, tmp string) []string {
	env := runner.Environ(credentials)
	set := func(k, v string) { env = append(env, k+"="+v) }
	if home != "" {
		set("GEMINI_CLI_HOME", home)
	}
	// Gemini writes an error report for every failed API call to the OS temp
	// dir; the run's own TMPDIR keeps them out of /tmp and goes with the run.
	set("TMPDIR", tmp)
	if opts.Endpoint != nil {
		set("GOOGLE_GEMINI_BASE_URL", strings.TrimSuffix(opts.Endpoint.BaseURL, "/"))
		if opts.Endpoint.APIKey != "" {
			set("GEMINI_API_KEY", opts.Endpoint.APIKey)
		}
	}
	for k, v := range opts.Env {
		set(k, v)
	}
	return env
}

// settingsFile is GEMINI_CLI_HOME's settings path.
func settingsFile(home string) string { return filepath.Join(home, ".gemini", "settings.json") }

// prepareHome creates the config home, seeds it with the user's Gemini
// configuration (ADP-7, SEC-4; the login only when the run may need it),
// and merges the run's settings into its settings.json: drover's keys win,
// every other setting stays.
func prepareHome(home string, opts drover.Options) error {
	if err := os.MkdirAll(filepath.Join(home, ".gemini"), 0o700); err != nil {
		return err
	}
	if err := seedHome(home, opts.Endpoint == nil || opts.Endpoint.APIKey == ""); err != nil {
		return err
	}
	path := settingsFile(home)
	s := map[string]any{}
	if data, err := os.ReadFile(path); err == nil {
		// Gemini reads its settings as JSON with comments; a user's
		// seeded file may have them.
		if err := json.Unmarshal(runner.StripJSONComments(data), &s); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	applySettings(s, opts)
	if err := applyMCP(home, s, opts); err != nil {
		return err
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o600)
}

// applySettings sets what drover owns in a config home's settings.
func applySettings(s map[string]any, opts drover.Options) {
	// drover pins and tests CLI versions; a CLI updating itself would run untested code.
	setPath(s, false, "general", "enableAutoUpdate")
	setPath(s, false, "general", "enableAutoUpdateNotification")
	if opts.Endpoint != nil {
		// Without it gemini derives the auth type "gateway" from
		// GOOGLE_GEMINI_BASE_URL, which headless 0.61.0 rejects (exit 41);
		// the base URL is still honoured with gemini-api-key.
		setPath(s, "gemini-api-key", "security", "auth", "selectedType")
		// Usage statistics (Clearcut) and telemetry are the only traffic
		// besides the model API.
		setPath(s, false, "privacy", "usageStatisticsEnabled")
		setPath(s, false, "telemetry", "enabled")
	}
	// A config home is reused across runs: values of an earlier run must not
	// stick, so unset options restore gemini's defaults.
	if opts.APIRetries != nil {
		// maxAttempts counts the first request; gemini caps it at 10.
		setPath(s, min(*opts.APIRetries+1, 10), "general", "maxAttempts")
	} else if g, ok := s["general"].(map[string]any); ok {
		delete(g, "maxAttempts")
	}
	turns := -1
	if opts.MaxTurns > 0 {
		turns = opts.MaxTurns
	}
	setPath(s, turns, "model", "maxSessionTurns")
}

// setPath sets s[k1][k2]…= v, creating (or replacing non-object) levels.
func setPath(s map[string]any, v any, keys ...string) {
	for _, k := range keys[:len(keys)-1] {
		next, ok := s[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			s[k] = next
		}
		s = next
	}
	s[keys[len(keys)-1]] = v
}

// userGeminiDir is the user's own Gemini directory (~/.gemini, or under
// GEMINI_CLI_HOME when the user set it).
func userGeminiDir() string {
	if h := os.Getenv("GEMINI_CLI_HOME"); h != "" {
		return filepath.Join(h, ".gemini")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".gemini")
}

// seedHome seeds config home with the user's Gemini configuration where
// it has none of its own (SEC-4: drover adds to the user's configuration
// and never silently drops it): the user's settings.json whole (the auth
// method, provider and every other setting; prepareHome then sets
// drover's keys on top) and the user's .env (Gemini reads provider
// variables such as GEMINI_API_KEY or GOOGLE_GEMINI_BASE_URL from
// ~/.gemini/.env); with login, also the OAuth credentials and account.
func seedHome(home string, login bool) error {
	src := userGeminiDir()
	dst := filepath.Join(home, ".gemini")
	if src == "" || filepath.Clean(src) == filepath.Clean(dst) {
		return nil
	}
	files := []string{"settings.json", ".env"}
	if login {
		files = append(files, "oauth_creds.json", "google_accounts.json")
	}
	for _, f := range files {
		if err := runner.CopyIfAbsent(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
			return err
		}
	}
	return nil
}
