package drover

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Tier is a permission tier (PERM-1). Each tier strictly adds to the one
// before: sandbox < dry-run < supervised < autonomous.
type Tier string

// The four permission tiers.
const (
	// TierSandbox allows no native tools at all (MCP tools only).
	TierSandbox Tier = "sandbox"
	// TierDryRun is read-only: read, search, plan; no writes, no shell.
	TierDryRun Tier = "dry-run"
	// TierSupervised edits files in the workspace; shell, network and
	// anything else needs approval, and with nobody to approve is denied.
	TierSupervised Tier = "supervised"
	// TierAutonomous allows everything, with no prompts.
	TierAutonomous Tier = "autonomous"
)

// DefaultTier is the tier of a run that names none.
const DefaultTier = TierSupervised

// Tiers returns the four tiers from least to most permissive, in a new
// slice the caller may keep or change.
func Tiers() []Tier { return []Tier{TierSandbox, TierDryRun, TierSupervised, TierAutonomous} }

// ParseTier accepts a tier name, including the OpenNova trust levels
// (controlled → supervised, unrestricted → autonomous).
func ParseTier(s string) (Tier, error) {
	switch s {
	case "sandbox":
		return TierSandbox, nil
	case "dry-run", "dryrun", "read-only":
		return TierDryRun, nil
	case "supervised", "controlled":
		return TierSupervised, nil
	case "autonomous", "unrestricted":
		return TierAutonomous, nil
	}
	return "", fmt.Errorf("unknown tier %q (want sandbox, dry-run, supervised or autonomous)", s)
}

// Endpoint points a vendor CLI at a model API other than its default: a
// gateway, or drover's fakemodel for offline runs.
type Endpoint struct {
	// BaseURL is the API root without a version suffix, e.g. http://127.0.0.1:8080.
	BaseURL string `json:"baseUrl"`
	// APIKey is passed the way the vendor expects an API key.
	APIKey string `json:"apiKey,omitempty"`
}

// Options configure one run. The zero value is a valid run in the default
// tier with the vendor's defaults. An option the chosen adapter cannot honour
// fails the run before the vendor CLI starts (ADP-3).
type Options struct {
	Model string `json:"model,omitempty"`
	Cwd   string `json:"cwd,omitempty"`
	Tier  Tier   `json:"tier,omitempty"`
	// MaxTurns ends the run with done{max_turns} when the model would
	// begin response MaxTurns+1; MaxBudgetUSD ends it with
	// done{max_budget} once its cost reaches that many dollars. The vendor
	// enforces them where it can, drover's engine elsewhere (docs/limits.md).
	MaxTurns     int     `json:"maxTurns,omitempty"`
	MaxBudgetUSD float64 `json:"maxBudgetUsd,omitempty"`
	// Prices price models by name or name prefix in USD per million tokens
	// (see LookupPrice), before the DROVER_PRICES file and the built-in
	// table: what drover's cost estimate and a budget it enforces use.
	Prices map[string]Price `json:"prices,omitempty"`
	// Resume is a vendor resume token (a "done" event's resumeToken).
	Resume string `json:"resume,omitempty"`
	// Fork, with Resume, continues from that conversation in a new vendor
	// session, leaving the original untouched (only where the vendor can).
	Fork bool `json:"fork,omitempty"`
	// AllowedTools restricts the agent's tools to exactly these names (ENG-013).
	AllowedTools []string `json:"allowedTools,omitempty"`
	// DisallowedTools removes these names from the agent's tools (ENG-013),
	// AllowedTools' included: filters come from layered policies, and a
	// tool both allowed and disallowed is removed.
	DisallowedTools []string `json:"disallowedTools,omitempty"`
	// AddDirs are extra directories the agent may access besides Cwd.
	AddDirs []string `json:"addDirs,omitempty"`
	// SystemPrompt is appended to the vendor's system prompt.
	SystemPrompt string `json:"systemPrompt,omitempty"`
	// Env adds variables to the vendor process environment.
	Env map[string]string `json:"env,omitempty"`
	// MCPServers are MCP servers the agent may use, by name (MCP-2): each
	// reaches the vendor in its own configuration form. A vendor that
	// cannot take one of them refuses the run (ADP-3).
	MCPServers map[string]MCPServer `json:"mcpServers,omitempty"`
	// ConfigDir, when set, gives the vendor CLI its own configuration home in
	// that directory (created if missing, seeded with the user's credentials)
	// instead of the user's own (ADP-7). Keep the directory to resume later.
	ConfigDir string `json:"configDir,omitempty"`
	// Endpoint, when set, points the vendor CLI at another model API.
	Endpoint *Endpoint `json:"endpoint,omitempty"`
	// APIRetries, when set, caps the vendor CLI's own retries of failed API calls.
	APIRetries *int `json:"apiRetries,omitempty"`
	// PartialText asks for text_delta events where the vendor can stream them.
	PartialText bool `json:"partialText,omitempty"`
	// Binary overrides where the vendor CLI is found.
	Binary string `json:"binary,omitempty"`
	// SessionID is the drover session the run belongs to, stamped on every
	// event. Engine.Run with none starts a new session id; the supervisor
	// (runs) continues that session, passing its resume token underneath.
	SessionID string `json:"sessionId,omitempty"`
	// Timeout ends the run with error TIMEOUT when it runs longer; 0 means
	// none for Engine.Run, the supervisor's default for a supervised run.
	// On the wire (JSON) it is a duration string ("90s") or milliseconds.
	Timeout time.Duration `json:"timeout,omitempty"`
	// IdleTimeout ends the run with error IDLE_TIMEOUT when the agent produces
	// no event for that long (ADP-6); JSON as Timeout.
	IdleTimeout time.Duration `json:"idleTimeout,omitempty"`
	// PermissionRules answer matching permission requests without asking
	// anyone (CTL-2); deny rules win over allow rules. In JSON, a list of
	// strings such as "allow:Bash(git status*)".
	PermissionRules []PermissionRule `json:"permissionRules,omitempty"`
	// ApprovalTimeout is how long a permission request waits for an answer
	// (from the engine's permission callback or a client) before it is
	// denied. 0 means the engine's default with a callback, else no wait: what
	// no rule decides is denied at once, as in a run nobody watches. JSON
	// as Timeout.
	ApprovalTimeout time.Duration `json:"approvalTimeout,omitempty"`
	// Contain says whether the vendor process, and everything it starts,
	// is confined by the kernel to the run's write boundary (SEC-2, BND-2;
	// Landlock, Linux): nil, the default, contains every tier below
	// autonomous where the kernel can and runs uncontained where it cannot;
	// true contains in every tier and refuses the run (UNSUPPORTED_OPTION)
	// where the kernel cannot; false never contains. The done event's
	// metadata says what the run got (docs/security.md).
	Contain *bool `json:"contain,omitempty"`
	// Network restricts the TCP connections the contained vendor process,
	// and everything it starts, may make (SEC-5; Landlock ABI 4): "" does
	// not; NetworkAPIOnly allows only the model API's port (the
	// endpoint's, else 443) and those of the run's HTTP MCP servers; a
	// list of ports ("443,8080") allows those. A restriction needs
	// containment: it contains a run that would not be, and is refused
	// (UNSUPPORTED_OPTION) where it cannot be applied. Binding and UDP are
	// not restricted.
	Network string `json:"network,omitempty"`
	// ContainReads limits what the contained vendor process, and
	// everything it starts, may read to its write boundary, the system's
	// directories, the programs on its PATH and the vendor's installation
	// (SEC-5): drover's state, the user's other files and credentials are
	// out of reach. It needs containment: it contains a run that would not
	// be, and cannot go with contain false.
	ContainReads bool `json:"containReads,omitempty"`
	// Worktree, when set, runs the agent in a git workspace of its own on
	// a branch of its own (WS-1, docs/workspaces.md): a service of the
	// supervisor (runs), which records the run's change for review;
	// Engine.Run refuses it.
	Worktree *Worktree `json:"worktree,omitempty"`
	// Failover, when set, is the run's failover chain (FAIL-1): the
	// credential profiles, models and agents tried, in turn, when an
	// attempt fails retryably before any tool ran (failover.go). Its
	// profiles' secrets are redacted wherever options are recorded.
	Failover *Failover `json:"failover,omitempty"`
}

// Worktree asks for a run's workspace of its own (Options.Worktree).
type Worktree struct {
	// Base is the commit the workspace starts from: a branch, tag or
	// commit of the repository the run's Cwd lies in; "" means HEAD.
	Base string `json:"base,omitempty"`
	// IncludeDirty carries the uncommitted changes of the user's working
	// tree (untracked files included) into the workspace; they are not
	// part of the run's change.
	IncludeDirty bool `json:"includeDirty,omitempty"`
	// Check is a shell command run in the workspace once the agent has
	// ended (e.g. "go test ./..."); whether it passed, and the tail of
	// its output, are recorded with the run's change (WS-4).
	Check string `json:"check,omitempty"`
}

// NetworkAPIOnly is the Network that allows only the model API's port.
const NetworkAPIOnly = "api-only"

// Containment reports whether o asks for the vendor process to be
// contained (see Contain), and whether it asks explicitly: Contain when
// set; else a Network restriction or ContainReads, which need containment;
// by default, every tier below autonomous.
func (o Options) Containment() (on, explicit bool) {
	if o.Contain != nil {
		return *o.Contain, true
	}
	if o.Network != "" || o.ContainReads {
		return true, true
	}
	return o.EffectiveTier() != TierAutonomous, false
}

// NetworkPorts returns the TCP ports o.Network allows connecting to, and
// whether it restricts at all; an error for a Network that is neither
// NetworkAPIOnly nor a list of ports.
func (o Options) NetworkPorts() (ports []uint16, restricted bool, err error) {
	switch o.Network {
	case "":
		return nil, false, nil
	case NetworkAPIOnly:
		api := "https://api.invalid"
		if o.Endpoint != nil {
			api = o.Endpoint.BaseURL
		}
		urls := []string{api}
		for _, name := range slices.Sorted(maps.Keys(o.MCPServers)) {
			if u := o.MCPServers[name].URL; u != "" {
				urls = append(urls, u)
			}
		}
		for _, raw := range urls {
			u, err := url.Parse(raw)
			if err != nil {
				return nil, true, &Error{Code: CodeValidation, Message: fmt.Sprintf("network %s: %q: %v", o.Network, raw, err)}
			}
			port := u.Port()
			if port == "" {
				port = map[string]string{"http": "80", "ws": "80"}[u.Scheme]
			}
			if port == "" {
				port = "443"
			}
			n, _ := strconv.ParseUint(port, 10, 16)
			ports = append(ports, uint16(n))
		}
	default:
		for f := range strings.SplitSeq(o.Network, ",") {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
			if err != nil || n == 0 {
				return nil, true, &Error{Code: CodeValidation, Message: fmt.Sprintf("network %q: want %q or a list of TCP ports such as \"443,8080\"", o.Network, NetworkAPIOnly)}
			}
			ports = append(ports, uint16(n))
		}
	}
	slices.Sort(ports)
	return slices.Compact(ports), true, nil
}

// WorkDirs returns the run's working directory and extra directories as
// absolute, cleaned paths: Cwd (the current directory when empty) and
// AddDirs (relative ones taken from the working directory). With the
// vendor's own state they are the run's write boundary (BND-1).
func (o Options) WorkDirs() (cwd string, addDirs []string) {
	cwd = o.Cwd
	if cwd == "" {
		cwd, _ = os.Getwd()
	}
	if abs, err := filepath.Abs(cwd); err == nil {
		cwd = abs
	}
	for _, d := range o.AddDirs {
		if !filepath.IsAbs(d) {
			d = filepath.Join(cwd, d)
		}
		addDirs = append(addDirs, filepath.Clean(d))
	}
	return cwd, addDirs
}

// MCPServer is one MCP server of a run (the .mcp.json shape): a local
// program spoken to on stdio (Command, Args, Env), or a remote server
// (URL, Headers) over streamable HTTP, or SSE when Type says "sse".
type MCPServer struct {
	Type    string            `json:"type,omitempty"` // "stdio", "http" or "sse"; empty: stdio with a Command, else http
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// Transport is the server's transport: "stdio", "http" or "sse".
func (m MCPServer) Transport() string {
	switch {
	case m.Type != "":
		return m.Type
	case m.Command != "":
		return "stdio"
	}
	return "http"
}

// validate checks that the server names one transport and what it needs.
func (m MCPServer) validate(name string) error {
	switch t := m.Transport(); {
	case t != "stdio" && t != "http" && t != "sse":
		return fmt.Errorf("mcp server %q: type %q (want stdio, http or sse)", name, t)
	case t == "stdio" && (m.Command == "" || m.URL != ""):
		return fmt.Errorf("mcp server %q: a stdio server needs a command and no url", name)
	case t != "stdio" && (m.URL == "" || m.Command != ""):
		return fmt.Errorf("mcp server %q: an %s server needs a url and no command", name, t)
	}
	return nil
}

// EffectiveTier returns the tier by its canonical name (an OpenNova name
// such as "unrestricted" is the tier it stands for), or DefaultTier when
// none is set. An unknown name is returned as it is (Validate refuses it).
func (o Options) EffectiveTier() Tier {
	if o.Tier == "" {
		return DefaultTier
	}
	if t, err := ParseTier(string(o.Tier)); err == nil {
		return t
	}
	return o.Tier
}

// Validate checks what holds for every adapter; it does not know what a
// particular vendor supports.
func (o Options) Validate() error {
	if o.Tier != "" {
		if _, err := ParseTier(string(o.Tier)); err != nil {
			return &Error{Code: CodeValidation, Message: err.Error()}
		}
	}
	if o.MaxTurns < 0 {
		return &Error{Code: CodeValidation, Message: fmt.Sprintf("maxTurns must be positive, got %d", o.MaxTurns)}
	}
	if o.MaxBudgetUSD < 0 {
		return &Error{Code: CodeValidation, Message: fmt.Sprintf("maxBudgetUsd must be positive, got %g", o.MaxBudgetUSD)}
	}
	for _, model := range slices.Sorted(maps.Keys(o.Prices)) {
		if err := o.Prices[model].Validate(model); err != nil {
			return &Error{Code: CodeValidation, Message: err.Error()}
		}
	}
	if o.Timeout < 0 || o.IdleTimeout < 0 || o.ApprovalTimeout < 0 {
		return &Error{Code: CodeValidation, Message: "timeouts must not be negative"}
	}
	for _, r := range o.PermissionRules {
		if (r.Behavior != Allow && r.Behavior != Deny) || r.Tool == "" {
			return &Error{Code: CodeValidation, Message: fmt.Sprintf("permission rule %q: want a behavior (allow or deny) and a tool", r.String())}
		}
	}
	if _, _, err := o.NetworkPorts(); err != nil {
		return err
	}
	if o.Contain != nil && !*o.Contain && (o.Network != "" || o.ContainReads) {
		return &Error{Code: CodeValidation, Message: "network and containReads need containment: they cannot go with contain false"}
	}
	if o.Fork && o.Resume == "" {
		return &Error{Code: CodeValidation, Message: "fork needs a resume token to fork from"}
	}
	if o.APIRetries != nil && *o.APIRetries < 0 {
		return &Error{Code: CodeValidation, Message: "apiRetries must not be negative"}
	}
	for _, name := range slices.Sorted(maps.Keys(o.MCPServers)) {
		if err := o.MCPServers[name].validate(name); err != nil {
			return &Error{Code: CodeValidation, Message: err.Error()}
		}
	}
	if o.Failover != nil {
		return o.Failover.validate()
	}
	return nil
}

// ToolAllowed reports whether the tool filter of o (ENG-013) admits name:
// in AllowedTools when that list is set, and not in DisallowedTools. Names
// are compared exactly.
func (o Options) ToolAllowed(name string) bool {
	if len(o.AllowedTools) > 0 && !slices.Contains(o.AllowedTools, name) {
		return false
	}
	return !slices.Contains(o.DisallowedTools, name)
}

// FilterTools returns the tools of all that the filter of o admits, in order.
func (o Options) FilterTools(all []string) []string {
	out := make([]string, 0, len(all))
	for _, t := range all {
		if o.ToolAllowed(t) {
			out = append(out, t)
		}
	}
	return out
}

// Capabilities say what an adapter can honour; the engine shows them to
// users, and an adapter refuses options beyond them (ADP-3).
type Capabilities struct {
	Tiers []Tier `json:"tiers"`
	// MaxTurns and MaxBudget: the run's turn and budget limits are
	// honoured, by the vendor itself where NativeMaxTurns or
	// NativeMaxBudget says so, else by drover's engine (docs/limits.md).
	// The engine enforces them for every agent, whatever an adapter says.
	MaxTurns        bool `json:"maxTurns"`
	MaxBudget       bool `json:"maxBudget"`
	NativeMaxTurns  bool `json:"nativeMaxTurns,omitempty"`
	NativeMaxBudget bool `json:"nativeMaxBudget,omitempty"`
	Resume          bool `json:"resume"`
	Fork            bool `json:"fork"`
	AllowedTools    bool `json:"allowedTools"`
	DisallowedTools bool `json:"disallowedTools"`
	AddDirs         bool `json:"addDirs"`
	SystemPrompt    bool `json:"systemPrompt"`
	PartialText     bool `json:"partialText"`
	Thinking        bool `json:"thinking"`
	Cost            bool `json:"cost"`
	ConfigDir       bool `json:"configDir"`
	Endpoint        bool `json:"endpoint"`
	APIRetries      bool `json:"apiRetries"`
	// Permissions: the vendor asks before tool calls that need approval,
	// and takes the answers (PERM-2): CanUseTool, PermissionRules and
	// ApprovalTimeout are honoured.
	Permissions bool `json:"permissions"`
	// Steer: the vendor takes user messages while it runs (Control.Steer).
	Steer bool `json:"steer"`
	// Interrupt: the vendor can end its current turn and keep the session
	// (Control.Interrupt).
	Interrupt bool `json:"interrupt"`
	// MCPTransports are the MCP server transports the vendor takes
	// ("stdio", "http", "sse"); an Options.MCPServers entry of another is
	// refused.
	MCPTransports []string `json:"mcpTransports,omitempty"`
	// Contain lists the tiers in which drover can contain the vendor
	// (Options.Contain, SEC-2); nil means every tier. A vendor that
	// sandboxes its own commands by means a Landlock domain forbids (mount
	// namespaces) leaves those tiers out: there its own sandbox holds the
	// boundary, a run is not contained by default, and asking for it is
	// refused.
	Contain []Tier `json:"contain,omitempty"`
	// ContainLive lists the tiers in which drover can contain the vendor
	// besides Contain, in a run that can be answered or steered
	// (Request.Live) only: a vendor that sandboxes its own commands there
	// when it runs headless, and runs them unsandboxed under the kernel's
	// boundary when it can ask.
	ContainLive []Tier `json:"containLive,omitempty"`
}

// Contains reports whether drover can contain the vendor in tier, in a run
// that can be answered or steered (live) or one that cannot (see Contain
// and ContainLive).
func (c Capabilities) Contains(tier Tier, live bool) bool {
	return c.Contain == nil || slices.Contains(c.Contain, tier) || live && slices.Contains(c.ContainLive, tier)
}

// Unsupported returns the first option in o that c cannot honour, as an
// UNSUPPORTED_OPTION error, or nil. Adapters call it before starting the CLI.
func (c Capabilities) Unsupported(o Options) error {
	check := []struct {
		set, ok bool
		name    string
	}{
		{o.Resume != "", c.Resume, "resume"},
		{o.Fork, c.Fork, "fork"},
		{len(o.AllowedTools) > 0, c.AllowedTools, "allowedTools"},
		{len(o.DisallowedTools) > 0, c.DisallowedTools, "disallowedTools"},
		{len(o.AddDirs) > 0, c.AddDirs, "addDirs"},
		{o.SystemPrompt != "", c.SystemPrompt, "systemPrompt"},
		{o.PartialText, c.PartialText, "partialText"},
		{o.ConfigDir != "", c.ConfigDir, "configDir"},
		{o.Endpoint != nil, c.Endpoint, "endpoint"},
		{o.APIRetries != nil, c.APIRetries, "apiRetries"},
		{len(o.PermissionRules) > 0, c.Permissions, "permissionRules"},
		{o.ApprovalTimeout > 0, c.Permissions, "approvalTimeout (answering permission requests)"},
	}
	for _, ch := range check {
		if ch.set && !ch.ok {
			return &Error{Code: CodeUnsupportedOption, Message: ch.name + " is not supported by this agent"}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(o.MCPServers)) {
		if t := o.MCPServers[name].Transport(); !slices.Contains(c.MCPTransports, t) {
			return &Error{Code: CodeUnsupportedOption, Message: fmt.Sprintf("mcp server %q: this agent cannot use %s MCP servers", name, t)}
		}
	}
	if t := o.EffectiveTier(); !slices.Contains(c.Tiers, t) {
		return &Error{Code: CodeUnsupportedOption, Message: fmt.Sprintf("tier %s cannot be enforced by this agent", t)}
	}
	return nil
}

// optionsFields is Options without its methods, for the JSON form.
type optionsFields Options

// optionsWire is the JSON form of Options: its fields, with the two
// timeouts as durations (the shallower fields win over the embedded ones).
type optionsWire struct {
	optionsFields
	Timeout         wireDuration `json:"timeout,omitempty"`
	IdleTimeout     wireDuration `json:"idleTimeout,omitempty"`
	ApprovalTimeout wireDuration `json:"approvalTimeout,omitempty"`
}

// MarshalJSON writes o with its timeouts as Go duration strings ("1m30s").
func (o Options) MarshalJSON() ([]byte, error) {
	return json.Marshal(optionsWire{optionsFields(o), wireDuration(o.Timeout), wireDuration(o.IdleTimeout), wireDuration(o.ApprovalTimeout)})
}

// UnmarshalJSON reads o, taking each timeout as a duration string ("90s",
// "10m") or a number of milliseconds. An unknown field is an error: a
// misspelt option must not make a silently different run.
func (o *Options) UnmarshalJSON(data []byte) error {
	var w optionsWire
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return fmt.Errorf("options: %w", err)
	}
	*o = Options(w.optionsFields)
	o.Timeout, o.IdleTimeout, o.ApprovalTimeout = time.Duration(w.Timeout), time.Duration(w.IdleTimeout), time.Duration(w.ApprovalTimeout)
	return nil
}

// wireDuration is a time.Duration on the wire: written as a duration
// string, read from one or from a number of milliseconds.
type wireDuration time.Duration

func (d wireDuration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

func (d *wireDuration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("duration %q: want e.g. \"90s\" or a number of milliseconds", s)
		}
		*d = wireDuration(v)
		return nil
	}
	ms, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("duration %s: want e.g. \"90s\" or a number of milliseconds", b)
	}
	*d = wireDuration(ms * float64(time.Millisecond))
	return nil
}
