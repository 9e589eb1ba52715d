package opencode

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/internal/runner"
)

const (
	// AgentName is the OpenCode agent drover defines for every run (in
	// OPENCODE_CONFIG_CONTENT) and selects with --agent: it carries the
	// tier's permission rules, so an agent of the same name in the user's or
	// the workspace's config cannot widen them.
	AgentName = "drover"
	// EndpointProvider is the provider id drover defines when
	// Options.Endpoint is set; the model is "drover/<Model>".
	EndpointProvider = "drover"
	// DefaultEndpointModel is the model id used with an Endpoint and no
	// Options.Model (any id works with an OpenAI-compatible endpoint that
	// ignores it, such as a fake model server).
	DefaultEndpointModel = "default"
)

// Capabilities reports what OpenCode 1.18.33 can honour. MaxTurns (the agent
// "steps" setting is advisory: a model that keeps calling tools is never
// stopped) and MaxBudgetUSD are drover's engine's (docs/limits.md); Fork
// is refused. Permissions, Interrupt and
// PartialText are a live run's (Request.Live), which drives `opencode acp`
// (acp.go); `run` prints whole parts, so without a Live PartialText is
// refused in Prepare. ACP v1 has no steering.
func (a *Adapter) Capabilities() drover.Capabilities {
	return drover.Capabilities{
		MaxTurns: true, MaxBudget: true,
		Resume: true, AllowedTools: true, DisallowedTools: true, AddDirs: true, SystemPrompt: true,
		Thinking: true, Cost: true, ConfigDir: true, Endpoint: true, APIRetries: true, PartialText: true,
		Permissions: true, Interrupt: true,
		Tiers:         drover.Tiers(),
		MCPTransports: mcpTransports,
	}
}

// Prepare builds one opencode process: flags, the generated configuration in
// OPENCODE_CONFIG_CONTENT, the prompt on stdin, and the environment. Files
// drover needs on disk (the retry plugin, the system prompt) go into the
// config home: Options.ConfigDir, or a temporary directory removed in Cleanup.
// With req.Live, `opencode acp` and an ACP conversation instead (acp.go),
// with the same configuration.
func (a *Adapter) Prepare(req drover.Request) (*runner.Launch, error) {
	opts := req.Options
	live := req.Live != nil
	if err := checkToolFilter(opts); err != nil {
		return nil, err
	}
	if opts.Network != "" {
		// Measured on 1.18.33: its CLI reaches its own server over TCP on a
		// port of the moment, which no list of ports can allow ("OpenCode
		// service failure").
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "network is not supported by opencode: it talks to its own server over a TCP port chosen at start"}
	}
	if opts.PartialText && !live {
		return nil, &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "partialText is not supported by opencode run (whole parts only); it needs a run that can be answered (ACP)"}
	}
	home, isolated, cleanup, err := configHome(opts)
	if err != nil {
		return nil, err
	}
	fail := func(msg string, err error) (*runner.Launch, error) {
		cleanup()
		return nil, &drover.Error{Code: drover.CodeAdapterError, Message: msg, Err: err}
	}
	xdg := ""
	if isolated {
		xdg = home
	}
	env := Env(opts, xdg)
	files := map[string]string{}
	if home != "" {
		if err := seedHome(home, isolated, opts.Env["XDG_CONFIG_HOME"]); err != nil {
			return fail("prepare opencode config home", err)
		}
		if opts.APIRetries != nil {
			files["plugin"] = filepath.Join(home, "drover", "retries.js")
			if live {
				// A status left by an earlier run in this home is not this
				// run's.
				files["status"] = filepath.Join(home, "drover", "last-status")
				os.Remove(files["status"])
			}
		}
		if opts.SystemPrompt != "" {
			files["prompt"] = filepath.Join(home, "drover", "system-prompt.md")
		}
	}
	cfg, err := Config(opts, files)
	if err != nil {
		return fail("build opencode config", err)
	}
	if p := files["plugin"]; p != "" {
		if err := writeFile(p, retryPlugin(opts, files["status"])); err != nil {
			return fail("write opencode retry plugin", err)
		}
	}
	if p := files["prompt"]; p != "" {
		if err := writeFile(p, opts.SystemPrompt); err != nil {
			return fail("write opencode system prompt", err)
		}
	}
	env = append(env, ConfigContentEnv+"="+string(cfg), "OPENCODE_PERMISSION="+string(mustJSON(Permission(opts))))
	for k, v := range opts.Env {
		if k == ConfigContentEnv || k == "OPENCODE_PERMISSION" {
			// Merged into drover's (Config); the tier's rules win.
			continue
		}
		env = append(env, k+"="+v)
	}
	if live {
		return &runner.Launch{Args: []string{"acp"}, Env: env, Translator: a.conversation(req, files["status"], env),
			Converse: true, OpenTimeout: acp.DefaultOpenTimeout, Cleanup: cleanup, Writable: writable(env, home)}, nil
	}
	return &runner.Launch{Args: Args(opts, req.Prompt), Env: env, Stdin: req.Prompt,
		Translator: newTranslator(a.Stamp(req), opts, initModel(opts)), Cleanup: cleanup, Writable: writable(env, home)}, nil
}

// Adapter runs OpenCode. The zero value is not usable; call New.
type Adapter struct{ runner.Base }

var _ drover.Adapter = (*Adapter)(nil)

// New returns an OpenCode adapter.
func New() *Adapter {
	return runner.New(&Adapter{}, runner.Spec{ID: ID, Command: "opencode", BinaryEnv: BinaryEnv, TestedVersions: []string{TestedVersions},
		// OpenCode flushes its session database and stops its internal
		// server after the last step; measured 0.1–0.25 s, so 3 s of
		// silence after the final step means it hangs.
		Linger: 3 * time.Second})
}

// Args returns the opencode command-line arguments for opts; the prompt goes
// on stdin (OpenCode re-quotes a positional prompt that contains spaces) and
// only names the session (--title), which also spares the separate
// title-generation model request a new session otherwise makes.
func Args(opts drover.Options, prompt string) []string {
	args := []string{"run", "--format", "json", "--agent", AgentName, "--thinking"}
	if m := modelFlag(opts); m != "" {
		args = append(args, "--model", m)
	}
	if opts.Resume != "" {
		args = append(args, "--session", opts.Resume)
	} else {
		args = append(args, "--title", title(prompt))
	}
	return args
}

// title is the first line of the prompt, at most 60 characters.
func title(prompt string) string {
	t, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	t = strings.TrimSpace(t)
	if utf8.RuneCountInString(t) > 60 {
		t = string([]rune(t)[:60])
	}
	if t == "" {
		t = "drover run"
	}
	return t
}

// modelFlag is the --model value: "provider/model" as given, or with an
// Endpoint "drover/<model>".
func modelFlag(opts drover.Options) string {
	if opts.Endpoint != nil {
		return EndpointProvider + "/" + endpointModel(opts)
	}
	return opts.Model
}

func endpointModel(opts drover.Options) string {
	if opts.Model != "" {
		return opts.Model
	}
	return DefaultEndpointModel
}

// initModel is the model named in the synthesized init event.
func initModel(opts drover.Options) string { return modelFlag(opts) }

// rule is one permission rule; OpenCode evaluates rules in order and the last
// matching one wins, so order is part of the meaning.
type rule struct {
	Key    string
	Action any // "allow" | "ask" | "deny", or an ordered []rule of patterns
}

// rules is an ordered permission map.
type rules []rule

// MarshalJSON writes the rules as a JSON object in order.
func (rs rules) MarshalJSON() ([]byte, error) {
	var b strings.Builder
	b.WriteByte('{')
	for i, r := range rs {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(r.Key)
		v, err := json.Marshal(r.Action)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		b.Write(v)
	}
	b.WriteByte('}')
	return []byte(b.String()), nil
}

// Built-in tools of OpenCode 1.18.33 as offered to an OpenAI-compatible
// model (measured from the request's tools list).
var builtinTools = []string{"bash", "edit", "glob", "grep", "read", "skill", "task", "todowrite", "webfetch", "write"}

// readOnly are the permissions granted in dry-run (and kept in supervised):
// reading, searching and the todo list (planning).
var readOnly = []string{"read", "glob", "grep", "list", "todowrite"}

// editFamily are the tools OpenCode governs with the one "edit" permission;
// a filter cannot tell them apart.
var editFamily = []string{"edit", "write", "patch", "multiedit", "apply_patch"}

// permissionKey is the permission that governs tool name.
func permissionKey(tool string) string {
	if slices.Contains(editFamily, tool) {
		return "edit"
	}
	return tool
}

// Permission returns the permission rules that enforce opts' tier, tool
// filter and extra directories (PERM-1, ENG-013). The table and the
// measurements behind it are in docs/adapters/opencode.md.
func Permission(opts drover.Options) rules {
	var rs rules
	ext := func(base string) any {
		if len(opts.AddDirs) == 0 {
			return base
		}
		pat := rules{{"*", base}}
		for _, d := range opts.AddDirs {
			pat = append(pat, rule{filepath.Clean(d) + "/*", "allow"})
		}
		return pat
	}
	switch opts.EffectiveTier() {
	case drover.TierSandbox:
		rs = rules{{"*", "deny"}}
	case drover.TierDryRun:
		rs = rules{{"*", "deny"}}
		for _, p := range readOnly {
			rs = append(rs, rule{p, "allow"})
		}
		rs = append(rs, rule{"external_directory", ext("deny")})
	case drover.TierSupervised:
		// "ask" is answered "reject" by `opencode run` (nobody to ask), and
		// experimental.continue_loop_on_deny lets the model go on.
		rs = rules{{"*", "ask"}}
		for _, p := range readOnly {
			rs = append(rs, rule{p, "allow"})
		}
		rs = append(rs, rule{"edit", "allow"}, rule{"external_directory", ext("ask")})
	default:
		rs = rules{{"*", "allow"}}
	}
	rs = append(rs, mcpPermission(opts)...)
	if len(opts.AllowedTools) > 0 {
		// Everything not allowed is denied (removed); an allowed tool keeps
		// the tier's own rule, which the tier rules above already give it.
		keep := map[string]bool{}
		for _, t := range opts.AllowedTools {
			keep[permissionKey(t)] = true
		}
		for _, t := range builtinTools {
			if k := permissionKey(t); !keep[k] {
				rs = append(rs, rule{k, "deny"})
				keep[k] = true // once
			}
		}
	}
	seen := map[string]bool{}
	for _, t := range opts.DisallowedTools {
		if k := permissionKey(t); !seen[k] {
			seen[k] = true
			rs = append(rs, rule{k, "deny"})
		}
	}
	return rs
}

// checkToolFilter refuses an allow-list that names only part of the edit
// family: OpenCode's one "edit" permission would allow the rest too, a
// silently weaker run (ADP-3). Disallowing part of it removes the whole
// family, which is stricter and documented.
func checkToolFilter(opts drover.Options) error {
	n := 0
	for _, t := range opts.AllowedTools {
		if t == "edit" || t == "write" {
			n++
		}
	}
	if n == 1 {
		return &drover.Error{Code: drover.CodeUnsupportedOption,
			Message: "allowedTools: OpenCode governs edit and write with one permission; allow both or neither"}
	}
	return nil
}

// Tools returns the built-in tools opts leave offered to the model, the
// tools of the synthesized init event.
func Tools(opts drover.Options) []string {
	rs := Permission(opts)
	out := []string{}
	for _, t := range builtinTools {
		k := permissionKey(t)
		var last any
		for _, r := range rs {
			if r.Key == "*" || r.Key == k {
				last = r.Action
			}
		}
		if last != "deny" {
			out = append(out, t)
		}
	}
	return out
}

// Config returns the OPENCODE_CONFIG_CONTENT for opts: drover's
// configuration merged into the one the caller gave in the environment
// (mergeUserConfig). files names drover's files on disk: "plugin" (the
// retry cap) and "prompt" (the system prompt).
func Config(opts drover.Options, files map[string]string) ([]byte, error) {
	perm := Permission(opts)
	agent := map[string]any{
		"mode":        "primary",
		"description": "drover run (" + string(opts.EffectiveTier()) + ")",
		"permission":  perm,
	}
	cfg := map[string]any{
		"$schema":    "https://opencode.ai/config.json",
		"autoupdate": false,
		"share":      "disabled",
		"permission": perm,
		"agent":      map[string]any{AgentName: agent},
		// A rejected "ask" otherwise ends the whole run; with this the model
		// gets the rejection as the tool result and goes on, as with every
		// other vendor.
		"experimental": map[string]any{"continue_loop_on_deny": true},
	}
	if e := opts.Endpoint; e != nil {
		model := endpointModel(opts)
		key := e.APIKey
		if key == "" {
			key = "drover" // the provider package insists on a key
		}
		cfg["provider"] = map[string]any{EndpointProvider: map[string]any{
			// Bundled in the binary: a provider package that is not gets
			// installed from npm at startup, which hangs offline.
			"npm":  "@ai-sdk/openai-compatible",
			"name": "drover endpoint",
			"options": map[string]any{
				"baseURL": strings.TrimSuffix(e.BaseURL, "/") + "/v1",
				"apiKey":  key,
			},
			"models": map[string]any{model: map[string]any{"name": model, "tool_call": true, "reasoning": true}},
		}}
		cfg["model"] = EndpointProvider + "/" + model
		cfg["small_model"] = EndpointProvider + "/" + model
		cfg["enabled_providers"] = []string{EndpointProvider}
	} else if opts.Model != "" {
		// --model says it too; `opencode acp` has no such flag.
		cfg["model"] = opts.Model
	}
	if opts.SystemPrompt != "" {
		p := files["prompt"]
		if p == "" {
			return nil, fmt.Errorf("no file for the system prompt")
		}
		cfg["instructions"] = []string{p}
	}
	if opts.APIRetries != nil {
		p := files["plugin"]
		if p == "" {
			return nil, fmt.Errorf("no file for the retry plugin")
		}
		cfg["plugin"] = []string{"file://" + p}
	}
	if m := MCPConfig(opts); m != nil {
		cfg["mcp"] = m
	}
	cfg, err := mergeUserConfig(userConfigContent(opts), cfg)
	if err != nil {
		return nil, err
	}
	return json.Marshal(cfg)
}

func mustJSON(v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // rules of strings always encode
	}
	return data
}

// scrubbed reports whether an environment variable is a model provider's
// credential: OpenCode reads them (so they are the inherited credentials
// it gets, SEC-5), and must not find them when pointed at an Endpoint,
// since it enables every provider whose credentials it finds.
func scrubbed(name string) bool {
	for _, suf := range []string{"_API_KEY", "_API_TOKEN", "_AUTH_TOKEN", "_ACCESS_TOKEN"} {
		if strings.HasSuffix(name, suf) {
			return true
		}
	}
	switch name {
	case "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_BEARER_TOKEN_BEDROCK",
		"GOOGLE_APPLICATION_CREDENTIALS", "GOOGLE_CLOUD_PROJECT", "GOOGLE_VERTEX_PROJECT",
		"AZURE_RESOURCE_NAME", "GITHUB_TOKEN", "GH_TOKEN", "OPENCODE_AUTH_CONTENT", "OPENCODE_CONFIG", "OPENCODE_CONFIG_DIR":
		return true
	}
	return false
}

// Env returns the opencode process environment for opts, without drover's
// generated config (added by Prepare) and Options.Env (added last). home is
// the config home, or "" for the user's own.
func Env(opts drover.Options, home string) []string {
	var env []string
	for _, kv := range runner.Environ(scrubbed) {
		k, _, _ := strings.Cut(kv, "=")
		if opts.Endpoint != nil && scrubbed(k) || k == ConfigContentEnv || k == "OPENCODE_PERMISSION" {
			// The config content is merged into drover's (Config), whose
			// permission rules win.
			continue
		}
		env = append(env, kv)
	}
	set := func(k, v string) { env = append(env, k+"="+v) }
	if opts.Cwd != "" {
		// OpenCode takes its project directory from $PWD, not from its
		// working directory (measured: with drover's inherited PWD a
		// relative write landed in drover's own directory, outside Cwd).
		if abs, err := filepath.Abs(opts.Cwd); err == nil {
			set("PWD", abs)
		}
	}
	// drover pins and tests CLI versions; a CLI updating itself mid-fleet
	// would run untested code.
	set("OPENCODE_DISABLE_AUTOUPDATE", "1")
	set("OPENCODE_DISABLE_SHARE", "1")
	if opts.Endpoint != nil {
		// Nothing but the model API: no models.dev catalogue, no LSP
		// downloads.
		set("OPENCODE_DISABLE_MODELS_FETCH", "1")
		set("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
	}
	if opts.EffectiveTier() != drover.TierAutonomous {
		// A workspace's opencode.json or .opencode/agent/*.md can grant an
		// agent permissions that widen any tier (measured: bash ran in
		// supervised); below autonomous the workspace config is not read.
		set("OPENCODE_DISABLE_PROJECT_CONFIG", "1")
	}
	if home != "" {
		for _, d := range xdgDirs {
			set(d.env, filepath.Join(home, d.sub))
		}
	}
	return env
}

var xdgDirs = []struct{ env, sub string }{
	{"XDG_CONFIG_HOME", "config"}, {"XDG_DATA_HOME", "data"}, {"XDG_CACHE_HOME", "cache"}, {"XDG_STATE_HOME", "state"},
}

// configHome returns the directory of a run's own files and whether it is
// also OpenCode's config home (isolated: the XDG directories point into it):
// Options.ConfigDir (isolated); a new temporary directory, removed by
// cleanup, when an Endpoint is set (isolated: an offline run must not touch
// the user's config) or when drover only needs a place for its files (not
// isolated); or "" when the run needs neither.
func configHome(opts drover.Options) (home string, isolated bool, cleanup func(), err error) {
	if opts.ConfigDir != "" {
		if err := os.MkdirAll(opts.ConfigDir, 0o700); err != nil {
			return "", false, nil, &drover.Error{Code: drover.CodeAdapterError, Message: "create opencode config dir", Err: err}
		}
		if err := seedAuth(opts); err != nil {
			return "", false, nil, &drover.Error{Code: drover.CodeAdapterError, Message: "seed opencode config dir", Err: err}
		}
		return opts.ConfigDir, true, func() {}, nil
	}
	if opts.Endpoint == nil && opts.APIRetries == nil && opts.SystemPrompt == "" {
		return "", false, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "drover-opencode-")
	if err != nil {
		return "", false, nil, &drover.Error{Code: drover.CodeAdapterError, Message: "create opencode temp home", Err: err}
	}
	return dir, opts.Endpoint != nil, func() { os.RemoveAll(dir) }, nil
}

// seedHome creates the XDG directories of a config home and marks its
// OpenCode config directory as having its npm dependencies: OpenCode
// installs @opencode-ai/plugin into every config directory at startup, and
// when a plugin is configured (drover's retry cap) it waits for that install
// — about 70 s offline before it gives up.
//
// Only a config home of the run's own is touched (never the user's): the
// isolated home, and the directory a caller's Options.Env points
// XDG_CONFIG_HOME at (a test home).
func seedHome(home string, isolated bool, callerConfigHome string) error {
	var dirs []string
	if isolated {
		for _, d := range xdgDirs {
			if err := os.MkdirAll(filepath.Join(home, d.sub), 0o700); err != nil {
				return err
			}
		}
		dirs = append(dirs, filepath.Join(home, "config", "opencode"))
	}
	if callerConfigHome != "" {
		dirs = append(dirs, filepath.Join(callerConfigHome, "opencode"))
	}
	for _, d := range dirs {
		if err := stubDeps(d); err != nil {
			return err
		}
	}
	return nil
}

// stubDeps writes an empty node_modules and a package.json/lock pair that
// already list @opencode-ai/plugin, unless the directory has its own.
func stubDeps(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o700); err != nil {
		return err
	}
	dep := `{"@opencode-ai/plugin":"` + TestedVersions + `"}`
	if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"dependencies":`+dep+"}\n"), 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "package-lock.json"), []byte(`{"packages":{"":{"dependencies":`+dep+"}}}\n"), 0o600)
}

// seedAuth copies the user's OpenCode credentials (auth.json) and global
// config files (opencode.json, opencode.jsonc, config.json: their
// providers, MCP servers, agents; SEC-4) into a config home where it has
// none, when the run has no Endpoint with its own key (ADP-7).
func seedAuth(opts drover.Options) error {
	if opts.Endpoint != nil && opts.Endpoint.APIKey != "" {
		return nil
	}
	if src := userConfigDir(); src != "" {
		dst := filepath.Join(opts.ConfigDir, "config", "opencode")
		if filepath.Clean(src) != filepath.Clean(dst) {
			if err := os.MkdirAll(dst, 0o700); err != nil {
				return err
			}
			for _, f := range []string{"opencode.json", "opencode.jsonc", "config.json"} {
				if err := runner.CopyIfAbsent(filepath.Join(src, f), filepath.Join(dst, f)); err != nil {
					return err
				}
			}
		}
	}
	dst := filepath.Join(opts.ConfigDir, "data", "opencode", "auth.json")
	if _, err := os.Stat(dst); err == nil {
		return nil
	}
	src := userAuthFile()
	if src == "" || filepath.Clean(src) == filepath.Clean(dst) {
		return nil
	}
	data, err := os.ReadFile(src)
	if err != nil {
		return nil // no login to copy
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return os.WriteFile(dst, data, 0o600)
}

// userConfigDir is the user's OpenCode config directory
// ($XDG_CONFIG_HOME/opencode or ~/.config/opencode), "" when unknown.
func userConfigDir() string {
	cfg := os.Getenv("XDG_CONFIG_HOME")
	if cfg == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		cfg = filepath.Join(h, ".config")
	}
	return filepath.Join(cfg, "opencode")
}

// userAuthFile is where the user's OpenCode keeps its credentials.
func userAuthFile() string {
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		data = filepath.Join(h, ".local", "share")
	}
	return filepath.Join(data, "opencode", "auth.json")
}

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o600)
}
