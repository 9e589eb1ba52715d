package e2e

// MCP-2: MCP servers configured once per run (Options.MCPServers) reach
// every vendor in its native form. Each real CLI, offline against
// fakemodel, is scripted to call the lookup tool of internal/testkit/mcptest's
// server; the call and its answer are in the UES stream and in the
// server's call log. In sandbox, the tools the vendor offered the model
// (fakemodel's request log) are the MCP tool and, where the vendor cannot
// remove them, the natives named in mcpVendor.sandboxExtra.

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/testkit/mcptest"
)

// mcpVendor is one vendor as MCP-2 drives it.
type mcpVendor struct {
	name, id, command, binaryEnv string
	// tool is the name the vendor offers the model for the lookup tool of
	// server "probe"; event is the tool name in UES.
	tool, event string
	// transports are the transports the vendor takes.
	transports []string
	// sandboxExtra are native tools the vendor still offers in sandbox.
	sandboxExtra []string
	// deferred: the vendor does not offer MCP tools upfront; the model
	// finds them with a search tool (Codex's tool_search).
	deferred bool
	// asksNatives: in sandbox the vendor still offers its natives, and
	// asks for each (drover refuses at once); only MCP tools run.
	asksNatives bool
	// noInput: the vendor does not report an MCP call's input.
	noInput bool
	live    bool
}

var mcpVendors = []mcpVendor{
	{name: "claude", id: "claude-code", command: "claude", binaryEnv: "DROVER_CLAUDE_BIN", tool: "mcp__probe__lookup", event: "mcp__probe__lookup",
		// "Reserved placeholder that keeps deferred tool loading active;
		// never call this tool" (its description): no native tool.
		transports: []string{"stdio", "http", "sse"}, sandboxExtra: []string{"DeferredToolPlaceholder"}},
	codexMCP("codex", false),
	codexMCP("codex-live", true),
	geminiMCP("gemini", false),
	geminiMCP("gemini-acp", true),
	opencodeMCP("opencode", false),
	opencodeMCP("opencode-acp", true),
}

// codexMCP is Codex headless (exec) or live (app-server): MCP tools are
// named mcp__SERVER__TOOL and deferred behind tool_search; in sandbox it
// keeps the natives it cannot remove and its MCP resource tools.
func codexMCP(name string, live bool) mcpVendor {
	return mcpVendor{name: name, id: "codex", command: "codex", binaryEnv: "DROVER_CODEX_BIN", tool: "mcp__probe__lookup", event: "mcp__probe__lookup",
		transports: []string{"stdio", "http"}, deferred: true, live: live,
		sandboxExtra: []string{"apply_patch", "request_user_input", "tool_search", "list_mcp_resources", "list_mcp_resource_templates", "read_mcp_resource"}}
}

// geminiMCP is Gemini CLI headless or over ACP (`gemini --acp`, the ACP
// agent of this test).
func geminiMCP(name string, live bool) mcpVendor {
	return mcpVendor{name: name, id: gemini.ID, command: "gemini", binaryEnv: gemini.BinaryEnv, tool: "mcp_probe_lookup", event: "mcp_probe_lookup",
		transports: []string{"stdio", "http", "sse"}, live: live, asksNatives: live, noInput: live}
}

// opencodeMCP is OpenCode run or over ACP (`opencode acp`).
func opencodeMCP(name string, live bool) mcpVendor {
	return mcpVendor{name: name, id: opencode.ID, command: "opencode", binaryEnv: opencode.BinaryEnv, tool: "probe_lookup", event: "probe_lookup",
		transports: []string{"stdio", "http", "sse"}, live: live}
}

// lookupScript asks for lookup of the key in the prompt under the vendor's
// tool name, then says done.
func lookupScript(tool string) string {
	return `{"rules":[{"name":"lookup","match":"look up (\\S+)","steps":[{"tools":[{"name":"` + tool + `","input":{"key":"$1"}}]},{"text":"looked it up"}]}]}`
}

// mcpRun runs v with one MCP server "probe" over transport in tier and
// checks the call end to end; it returns the fakemodel requests.
func mcpRun(t *testing.T, v mcpVendor, transport string, tier drover.Tier) []fakemodel.Request {
	return mcpRunWant(t, v, transport, tier, true)
}

// mcpRunWant is mcpRun; with called false it checks instead that the
// server was never called and no successful result came back.
func mcpRunWant(t *testing.T, v mcpVendor, transport string, tier drover.Tier, called bool) []fakemodel.Request {
	t.Helper()
	bin := vendorBin(t, v.command, v.binaryEnv)
	w := newWorld(t, lookupScript(v.tool))
	// In the workspace: below autonomous the run is contained, and a stdio
	// server, the vendor's child, may write only inside the run's boundary.
	log := filepath.Join(w.cwd, "calls.jsonl")
	var server drover.MCPServer
	var h *mcptest.HTTP
	switch transport {
	case "stdio":
		server = drover.MCPServer{Command: mcptest.Build(t), Env: map[string]string{mcptest.LogEnv: log}}
	case "http":
		h = mcptest.Serve(t, log)
		server = drover.MCPServer{URL: h.URL, Headers: map[string]string{"X-Probe": "probe-header"}}
	case "sse":
		h = mcptest.Serve(t, log)
		server = drover.MCPServer{Type: "sse", URL: h.SSEURL}
	}
	o := w.opts()
	o.Binary, o.Tier, o.ConfigDir = bin, tier, filepath.Join(w.home, "config")
	o.MCPServers = map[string]drover.MCPServer{"probe": server}
	for _, d := range []struct{ env, sub string }{{"XDG_CONFIG_HOME", ".config"}, {"XDG_DATA_HOME", ".local/share"},
		{"XDG_CACHE_HOME", ".cache"}, {"XDG_STATE_HOME", ".local/state"}} {
		o.Env[d.env] = filepath.Join(w.home, d.sub)
	}
	o.Timeout = 3 * time.Minute
	if v.live {
		o.Control = engine.NewControl()
	}
	key := fmt.Sprintf("k%d", time.Now().UnixNano()%100000)
	events, err := o.start(context.Background(), builtin.Registry(), v.id, "look up "+key)
	if err != nil {
		t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		evs = append(evs, ev)
	}
	reqs := w.fake.Requests()
	for _, r := range reqs {
		t.Logf("request %s rule %q step %d tools %v resolution %v", r.Path, r.Rule, r.Step, r.ToolsOffered, r.Resolution)
	}
	d := doneOf(t, evs)
	if d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v; events %v", d, typesOf(evs))
	}
	if !called {
		if calls := mcptest.Calls(t, log); len(calls) != 0 {
			t.Errorf("the server was called: %+v", calls)
		}
		for _, r := range payloads[drover.ToolResultPayload](evs) {
			if r.Status == drover.ToolSuccess {
				t.Errorf("a successful tool result: %+v", r)
			}
		}
		return reqs
	}
	uses := slices.DeleteFunc(payloads[drover.ToolUsePayload](evs), func(p drover.ToolUsePayload) bool { return p.ToolName != v.event })
	if len(uses) != 1 || !v.noInput && uses[0].Input["key"] != key {
		t.Errorf("tool_use of %s: %+v (all: %+v)", v.event, uses, payloads[drover.ToolUsePayload](evs))
	}
	results := slices.DeleteFunc(payloads[drover.ToolResultPayload](evs), func(p drover.ToolResultPayload) bool { return p.ToolName != v.event })
	if len(results) != 1 || results[0].Status != drover.ToolSuccess || !strings.Contains(results[0].Output, mcptest.Answer(key)) {
		t.Errorf("tool_result of %s: %+v (all: %+v)", v.event, results, payloads[drover.ToolResultPayload](evs))
	}
	calls := mcptest.Calls(t, log)
	if len(calls) != 1 || calls[0].Key != key || calls[0].Transport != transport {
		t.Errorf("mcptest calls %+v, want one of key %s over %s", calls, key, transport)
	}
	if transport == "http" && !slices.ContainsFunc(h.Requests(), func(hd http.Header) bool { return hd.Get("X-Probe") == "probe-header" }) {
		t.Error("the configured header X-Probe never reached the MCP server")
	}
	return reqs
}

// TestMCP2_VendorsCallTheRunsMCPServer: each vendor, headless and live,
// calls the run's server over each transport it takes (in autonomous,
// where MCP tools run unasked on every vendor; sandbox is the next test).
func TestMCP2_VendorsCallTheRunsMCPServer(t *testing.T) {
	for _, v := range mcpVendors {
		for _, tr := range v.transports {
			t.Run(v.name+"/"+tr, func(t *testing.T) {
				t.Parallel()
				mcpRun(t, v, tr, drover.TierAutonomous)
			})
		}
	}
}

// TestMCP2_SandboxOffersOnlyMCPTools: in sandbox the run's MCP tool is
// offered, and nothing else but the natives the vendor cannot remove.
func TestMCP2_SandboxOffersOnlyMCPTools(t *testing.T) {
	for _, v := range mcpVendors {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			reqs := mcpRun(t, v, "stdio", drover.TierSandbox)
			if v.asksNatives {
				return
			}
			for _, r := range reqs {
				if r.Aux != "" || r.Rule == "" {
					continue
				}
				var extra []string
				for _, tool := range r.ToolsOffered {
					if tool != v.tool && !slices.Contains(v.sandboxExtra, tool) {
						extra = append(extra, tool)
					}
				}
				if len(extra) > 0 || !v.deferred && !slices.Contains(r.ToolsOffered, v.tool) {
					t.Errorf("sandbox offered %v: want %s and only %v besides", r.ToolsOffered, v.tool, v.sandboxExtra)
				}
			}
		})
	}
}

// TestMCP2_ACPAgentGetsServersInSessionNew: an agent configured as a
// plain ACP agent (adapter/acp; here `opencode acp`, trusted with
// autonomous, its provider in its own configuration) gets the run's
// servers in session/new, over each transport ACP names, and calls the
// tool.
func TestMCP2_ACPAgentGetsServersInSessionNew(t *testing.T) {
	bin := vendorBin(t, "opencode", opencode.BinaryEnv)
	for _, transport := range []string{"stdio", "http", "sse"} {
		t.Run(transport, func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, lookupScript("probe_lookup"))
			log := filepath.Join(w.cwd, "calls.jsonl")
			var server drover.MCPServer
			switch transport {
			case "stdio":
				server = drover.MCPServer{Command: mcptest.Build(t), Env: map[string]string{mcptest.LogEnv: log}}
			case "http":
				server = drover.MCPServer{URL: mcptest.Serve(t, log).URL}
			case "sse":
				server = drover.MCPServer{Type: "sse", URL: mcptest.Serve(t, log).SSEURL}
			}
			reg := drover.NewRegistry()
			if err := reg.Register(acp.New(acp.Agent{Name: "some-acp-agent", Command: bin, Args: []string{"acp"},
				Tiers: []drover.Tier{drover.TierAutonomous}})); err != nil {
				t.Fatal(err)
			}
			config := `{"provider":{"fake":{"npm":"@ai-sdk/openai-compatible","name":"Fake","options":{"baseURL":"` + w.url + `/v1","apiKey":"x"},
				"models":{"m":{"name":"M","tool_call":true}}}},"model":"fake/m","small_model":"fake/m","enabled_providers":["fake"],
				"autoupdate":false,"share":"disabled","permission":{"*":"allow"}}`
			env := map[string]string{"HOME": w.home, "OPENCODE_CONFIG_CONTENT": config, "OPENCODE_DISABLE_MODELS_FETCH": "1",
				"OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_AUTOUPDATE": "1", "PWD": w.cwd}
			for _, d := range []struct{ env, sub string }{{"XDG_CONFIG_HOME", ".config"}, {"XDG_DATA_HOME", ".local/share"},
				{"XDG_CACHE_HOME", ".cache"}, {"XDG_STATE_HOME", ".local/state"}} {
				env[d.env] = filepath.Join(w.home, d.sub)
			}
			key := fmt.Sprintf("k%d", time.Now().UnixNano()%100000)
			events, err := engine.New(reg).Run(context.Background(), "some-acp-agent", "look up "+key, drover.Options{
				Cwd: w.cwd, Tier: drover.TierAutonomous, Timeout: 3 * time.Minute, Env: env,
				MCPServers: map[string]drover.MCPServer{"probe": server}})
			if err != nil {
				t.Fatal(err)
			}
			var evs []drover.Event
			for ev := range events {
				evs = append(evs, ev)
			}
			if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
				t.Fatalf("done %+v; events %v", d, typesOf(evs))
			}
			results := payloads[drover.ToolResultPayload](evs)
			if !slices.ContainsFunc(results, func(r drover.ToolResultPayload) bool { return strings.Contains(r.Output, mcptest.Answer(key)) }) {
				t.Errorf("no tool_result with the server's answer: %+v (uses %+v)", results, payloads[drover.ToolUsePayload](evs))
			}
			if calls := mcptest.Calls(t, log); len(calls) != 1 || calls[0].Key != key || calls[0].Transport != transport {
				t.Errorf("mcptest calls %+v, want one of key %s over %s", calls, key, transport)
			}
		})
	}
}

// TestMCP2_SupervisedHeadlessRefuses: in supervised an MCP tool needs
// approval, and a headless run has nobody to ask: the call never reaches
// the server (Claude and Codex deny it; Gemini does not offer it;
// OpenCode rejects its "ask").
func TestMCP2_SupervisedHeadlessRefuses(t *testing.T) {
	for _, v := range mcpVendors {
		if v.live {
			continue
		}
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			mcpRunWant(t, v, "stdio", drover.TierSupervised, false)
		})
	}
}

// TestMCP2_CodexServerSecretsOutOfCommands: Codex gets a server's header
// and environment values through its own environment (never the command
// line), and the commands it runs for the model see those variables
// blank: the model's shell cannot read them (without drover's blanking it
// could: Codex 0.169.0's default policy passes its whole environment on).
func TestMCP2_CodexServerSecretsOutOfCommands(t *testing.T) {
	t.Parallel()
	bin := vendorBin(t, "codex", "DROVER_CODEX_BIN")
	w := newWorld(t, `{"rules":[{"match":"show env","steps":[{"tools":[{"shell":"env"}]},{"text":"shown"}]}]}`)
	o := w.opts()
	o.Binary, o.Tier, o.ConfigDir = bin, drover.TierAutonomous, filepath.Join(w.home, "config")
	o.MCPServers = map[string]drover.MCPServer{
		"remote": {URL: mcptest.Serve(t, "").URL, Headers: map[string]string{"Authorization": "Bearer header-value-1f2e"}},
		"local":  {Command: mcptest.Build(t), Env: map[string]string{"PROBE_SECRET": "env-value-9d8c"}},
	}
	evs := runAgent(t, "codex", o, "show env")
	if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
		t.Fatalf("done %+v", d)
	}
	var out string
	for _, r := range payloads[drover.ToolResultPayload](evs) {
		out += r.Output
	}
	if !strings.Contains(out, "PATH=") {
		t.Fatalf("the env command's output is not in the stream: %q", out)
	}
	for _, secret := range []string{"header-value-1f2e", "env-value-9d8c"} {
		if strings.Contains(out, secret) {
			t.Errorf("a command Codex ran sees %s", secret)
		}
	}
}
