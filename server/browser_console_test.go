package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/internal/testkit/browsertest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store/sqlite"
)

// The console tests (CON-1): the dashboard as a console a person
// supervises agents from. Each drives the page in headless Chromium.

// consoleAgents are the agents of the console tests besides the fixture's:
//
//	editor     edits, multi-edits, writes (100 lines) and patches files, then ends
//	chatty     writes texts between internal (extension) events, then ends
//	priced     names its model (Options.Model) in init and reports tokens, no cost
//	helper     asks to run "make", as asker does
//	versioned  an installed CLI of version 1.2.3
//	missing    a CLI that is not installed
func consoleAgents() []*agenttest.Agent {
	tool := func(name, id string, input map[string]any) drover.Event {
		return drover.Event{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: name, ToolUseID: id, Input: input}}
	}
	ok := func(name, id string) drover.Event {
		return drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{ToolUseID: id, ToolName: name, Status: drover.ToolSuccess}}
	}
	ext := func(typ string, payload any) drover.Event {
		b, _ := json.Marshal(payload)
		return drover.Event{Type: drover.EventType(typ), Payload: json.RawMessage(b)}
	}
	var hundred strings.Builder
	for i := range 100 {
		fmt.Fprintf(&hundred, "line %d of the new file\n", i+1)
	}
	helper := agenttest.Asker(true)
	helper.Name = "helper"
	return []*agenttest.Agent{
		{Name: "editor", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			evs := []drover.Event{
				tool("Edit", "e1", map[string]any{"file_path": "calc.go",
					"old_string": "func add(a, b int) int {\n\treturn a - b\n}",
					"new_string": "func add(a, b int) int {\n\treturn a + b\n}"}),
				ok("Edit", "e1"),
				tool("MultiEdit", "e2", map[string]any{"file_path": "README.md", "edits": []any{
					map[string]any{"old_string": "# calc", "new_string": "# calc <img src=x onerror=\"document.body.dataset.pwned=1\">"},
					map[string]any{"old_string": "old usage", "new_string": "new usage"},
				}}),
				ok("MultiEdit", "e2"),
				tool("Write", "w1", map[string]any{"file_path": "big.txt", "content": hundred.String()}),
				ok("Write", "w1"),
				tool("apply_patch", "p1", map[string]any{"input": "*** Begin Patch\n*** Update File: calc_test.go\n@@ func TestAdd\n-\tif add(1, 2) != -1 {\n+\tif add(1, 2) != 3 {\n*** End Patch\n"}),
				ok("apply_patch", "p1"),
				tool("Bash", "b1", map[string]any{"command": "go test ./..."}),
				ok("Bash", "b1"),
				done(drover.StatusSuccess),
			}
			for _, ev := range evs {
				if !y(ev, nil) {
					return
				}
			}
		}},
		{Name: "chatty", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			long := "claude-code:an_extremely_long_internal_event_type_name_that_goes_on_and_on_without_a_single_break_anywhere"
			evs := []drover.Event{
				text("first"),
				ext("claude-code:api_retry", map[string]any{"attempt": 1, "delayMs": 500}),
				ext("claude-code:status", map[string]any{"status": "compacting"}),
				ext("codex:token_count", map[string]any{"input": 10}),
				text("second"),
				ext(long, map[string]any{"blob": strings.Repeat("unbroken", 120)}),
				done(drover.StatusSuccess),
			}
			for _, ev := range evs {
				if !y(ev, nil) {
					return
				}
			}
		}},
		{Name: "priced", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
			_ = y(drover.Event{Type: drover.TypeInit, Payload: drover.InitPayload{Model: req.Options.Model}}, nil) &&
				y(text("priced"), nil) &&
				y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess,
					Usage: drover.Usage{InputTokens: 1000, OutputTokens: 500}}}, nil)
		}},
		helper,
		{Name: "versioned", Availability: func(context.Context) drover.Availability {
			return drover.Availability{Installed: true, Path: "/usr/bin/versioned", Version: "1.2.3", Tested: true, TestedVersions: "1.2.3"}
		}, Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			if y(text("versioned here"), nil) {
				y(done(drover.StatusSuccess), nil)
			}
		}},
		{Name: "missing", Availability: func(context.Context) drover.Availability {
			return drover.Availability{Installed: false, Error: "missing-cli not found on PATH"}
		}, Fn: func(context.Context, drover.Request, func(drover.Event, error) bool) {}},
	}
}

// newConsoleFixture is newFixture with the console's agents too, its
// handler wrapped by wrap when not nil.
func newConsoleFixture(t *testing.T, wrap func(http.Handler) http.Handler) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := gates{ch: make(chan chan struct{}, 16)}
	reg := drover.NewRegistry()
	for _, a := range append(append(agents(g), agenttest.Asker(true)), consoleAgents()...) {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	srv := server.New(api.NewLocal(sup, api.Config{Poll: 50 * time.Millisecond}), server.Config{Poll: 100 * time.Millisecond})
	hs := srv.HTTPServer()
	if wrap != nil {
		hs.Handler = wrap(hs.Handler)
	}
	ts := httptest.NewUnstartedServer(hs.Handler)
	ts.Config = hs
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.CloseClientConnections()
		ts.Close()
	})
	return &fixture{st: st, sup: sup, srv: srv, ts: ts, gates: g}
}

func (f *fixture) startWith(t *testing.T, body string) string {
	t.Helper()
	var res runs.Started
	if code := f.do(t, "POST", "/v1/runs", body, &res); code != http.StatusCreated || res.RunID == "" {
		t.Fatalf("POST /v1/runs %s: %d %+v", body, code, res)
	}
	return res.RunID
}

func openConsole(t *testing.T, f *fixture) *browsertest.Browser {
	t.Helper()
	b := browsertest.New(t)
	b.Do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.Wait(t, "the dashboard, live", `document.getElementById('conn').dataset.state === 'live'`)
	return b
}

// key types keys with nothing focused: as a person does on the page, not in
// a field.
func key(t *testing.T, b *browsertest.Browser, keys string) {
	t.Helper()
	browsertest.Eval[bool](t, b, `(document.activeElement && document.activeElement.blur(), true)`)
	b.Do(t, "type "+fmt.Sprintf("%q", keys), chromedp.KeyEvent(keys))
}

func noPageErrors(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}

// CON-1: the inbox lists every request waiting, across runs, with its
// agent, run, tool, description, age and countdown, in the page's title
// too; j/k/Enter pick a run and "a" allows its request (recorded as the
// dashboard's answer); Deny with a message in the inbox denies the other;
// keys typed in a field are the field's. Screenshot: dashboard-inbox.png.
func TestCON1_InboxAndKeys(t *testing.T) {
	f := newConsoleFixture(t, nil)
	b := openConsole(t, f)
	one := f.startWith(t, `{"agent":"asker","prompt":"build it\nthen tell me","options":{"approvalTimeout":"2m"}}`)
	two := f.startWith(t, `{"agent":"helper","prompt":"deploy it","options":{"approvalTimeout":"2m"}}`)

	b.Wait(t, "both requests in the inbox", `!document.getElementById('inbox').hidden &&
		document.querySelectorAll('#inbox-list li.inbox-item').length === 2`)
	b.Wait(t, "their age and countdown ticking", `[...document.querySelectorAll('#inbox-list .age')].every(e => /^asked \d+s ago$/.test(e.textContent))`)
	got := browsertest.Eval[[]map[string]string](t, b, `[...document.querySelectorAll('#inbox-list li.inbox-item')].map(li => ({
		run: li.dataset.runId, agent: li.querySelector('.agent').textContent, link: li.querySelector('a').getAttribute('href'),
		tool: li.querySelector('.tool').textContent, what: li.querySelector('.what').textContent,
		due: li.querySelector('.due').textContent, command: li.querySelector('details pre.command').textContent }))`)
	dueIn2m := regexp.MustCompile(`^denied in (1m [0-5]\ds|2m 00s) without an answer$`)
	want := map[string]string{one: "asker", two: "helper"}
	for _, it := range got {
		if want[it["run"]] != it["agent"] || it["link"] != "#run="+it["run"] || it["tool"] != "Bash" ||
			it["what"] != "Running `make`" || !dueIn2m.MatchString(it["due"]) || it["command"] != "$ make" {
			t.Errorf("inbox item %+v", it)
		}
		delete(want, it["run"])
	}
	if len(want) != 0 {
		t.Fatalf("inbox lacks %v: %+v", want, got)
	}
	if title, badge := browsertest.Eval[string](t, b, `document.title`), browsertest.Eval[string](t, b, `document.getElementById('inbox-badge').textContent`); title != "(2) drover" || badge != "2 requests waiting" {
		t.Fatalf("title %q, badge %q", title, badge)
	}
	b.Screenshot(t, "dashboard-inbox.png")

	// Keys: ? shows them, Esc hides them; / goes to the filter, where
	// letters are typed, not taken as keys.
	key(t, b, "?")
	b.Wait(t, "the keys shown", `!document.getElementById('keys').hidden`)
	key(t, b, kb.Escape)
	b.Wait(t, "the keys hidden", `document.getElementById('keys').hidden`)
	key(t, b, "/")
	b.Wait(t, "the filter focused", `document.activeElement === document.getElementById('filter-text')`)
	b.Do(t, "type in the filter", chromedp.KeyEvent("ad"))
	b.Wait(t, "the letters in the filter", `document.getElementById('filter-text').value === 'ad'`)
	time.Sleep(300 * time.Millisecond)
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('#inbox-list li.inbox-item').length`); n != 2 {
		t.Fatalf("typing in the filter answered a request: %d left", n)
	}
	browsertest.Eval[bool](t, b, `(() => { const q = document.getElementById('filter-text'); q.value = ''; return q.dispatchEvent(new Event('input')); })()`)
	b.Wait(t, "both runs listed again", `document.querySelectorAll('#runs-body tr.run').length === 2`)

	// j, j: the cursor on the second row (the older run); Enter opens it; a
	// allows its request.
	key(t, b, "j")
	b.Wait(t, "the cursor on the newest run", `document.querySelector('#runs-body tr.run.cursor')?.dataset.runId === `+browsertest.JS(two))
	key(t, b, "j")
	b.Wait(t, "the cursor on the older run", `document.querySelector('#runs-body tr.run.cursor')?.dataset.runId === `+browsertest.JS(one))
	key(t, b, kb.Enter)
	b.Wait(t, "the older run open", `document.getElementById('detail').dataset.runId === `+browsertest.JS(one)+` &&
		document.querySelectorAll('#pending-list li.request').length === 1`)
	key(t, b, "a")
	b.Wait(t, "the answer in its timeline, one request left", `document.querySelector('#timeline .ev[data-type="drover:permission_answer"]') !== null &&
		document.querySelector('#timeline .ev[data-type=tool_result] .status')?.textContent === 'success' &&
		document.querySelectorAll('#inbox-list li.inbox-item').length === 1 &&
		document.querySelector('#inbox-list li.inbox-item').dataset.runId === `+browsertest.JS(two)+` &&
		document.title === '(1) drover'`)

	// Deny from the inbox, with a message.
	b.Do(t, "deny with a message", chromedp.SendKeys(chromedp.CSS("#inbox-list li.inbox-item .actions input"), "not today", chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS("#inbox-list li.inbox-item button.deny")))
	b.Wait(t, "the inbox empty and hidden", `document.getElementById('inbox').hidden && document.title === 'drover' &&
		document.getElementById('inbox-badge').hidden`)

	for _, id := range []string{one, two} {
		f.do(t, "POST", "/v1/runs/"+id+"/steer", `{"message":"stop"}`, nil)
	}
	f.await(t, one, two)
	for id, want := range map[string]drover.Behavior{one: drover.Allow, two: drover.Deny} {
		calls, err := f.st.ToolCalls(t.Context(), id)
		if err != nil || len(calls) != 1 || calls[0].Permission == nil || calls[0].Permission.Behavior != want ||
			calls[0].Permission.Detail != "dashboard" || (want == drover.Deny && calls[0].Permission.Message != "not today") {
			t.Fatalf("%s: tool calls %+v %v, want %s by the dashboard", id, calls, err, want)
		}
	}
	noPageErrors(t, b)
}

// CON-1: without GET /v1/requests (a server from before it: 404) the inbox
// stays hidden, the page logs no error, and "a" still allows the request
// of the run the cursor is on.
func TestCON1_InboxHiddenWithoutEndpoint(t *testing.T) {
	f := newConsoleFixture(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/v1/requests" {
				http.NotFound(w, r)
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	b := openConsole(t, f)
	id := f.startWith(t, `{"agent":"asker","prompt":"build it","options":{"approvalTimeout":"2m"}}`)
	b.Wait(t, "the run listed", `document.querySelector(`+browsertest.JS(rowSel(id))+`) !== null`)
	f.waitSeq(t, id, 2)                 // its tool_use and permission_request
	time.Sleep(3500 * time.Millisecond) // a poll of the inbox would have come by now
	if hidden := browsertest.Eval[bool](t, b, `document.getElementById('inbox').hidden && document.getElementById('inbox-badge').hidden && document.title === 'drover'`); !hidden {
		t.Fatal("the inbox shows without its endpoint")
	}
	key(t, b, "j")
	b.Wait(t, "the cursor on the run", `document.querySelector('#runs-body tr.run.cursor')?.dataset.runId === `+browsertest.JS(id))
	key(t, b, "a")
	b.Wait(t, "said in the header", `document.getElementById('key-status').textContent.startsWith('Allowed Bash of ')`)
	f.do(t, "POST", "/v1/runs/"+id+"/steer", `{"message":"stop"}`, nil)
	f.await(t, id)
	if calls, _ := f.st.ToolCalls(t.Context(), id); len(calls) != 1 || calls[0].Permission == nil || calls[0].Permission.Behavior != drover.Allow {
		t.Fatalf("tool calls %+v", calls)
	}
	noPageErrors(t, b)
}

// CON-1: an edit's old and new text as a diff (removed red, added green,
// the lines both share as context), a multi-edit's edits each under its
// own header, a write's content as lines added, folded after 40 lines, a
// Codex patch coloured; none as raw JSON, and markup in them stays text.
// A shell call still shows its input. Screenshot: dashboard-edit-diff.png.
func TestCON1_EditsShownAsDiffs(t *testing.T) {
	f := newConsoleFixture(t, nil)
	b := openConsole(t, f)
	id := f.startWith(t, `{"agent":"editor","prompt":"fix add"}`)
	f.await(t, id)
	b.Do(t, "open the run", chromedp.Click(chromedp.CSS(rowSel(id)), chromedp.NodeVisible))
	b.Wait(t, "its timeline", `document.getElementById('detail').dataset.runId === `+browsertest.JS(id)+` &&
		document.querySelector('#timeline .ev[data-type=done]') !== null`)
	type block struct {
		Tool    string   `json:"tool"`
		Files   []string `json:"files"`
		Hunks   []string `json:"hunks"`
		Added   []string `json:"added"`
		Removed []string `json:"removed"`
		Context []string `json:"context"`
		More    string   `json:"more"`
		JSON    bool     `json:"json"`
	}
	read := func() []block {
		return browsertest.Eval[[]block](t, b, `[...document.querySelectorAll('#timeline .ev[data-type=tool_use]')].map(li => {
			const tx = (sel) => [...li.querySelectorAll(sel)].map(e => e.textContent);
			const more = li.querySelector('.diff-block .more');
			return { tool: li.querySelector('strong').textContent, files: tx('.dl-file .tx'), hunks: tx('.dl-hunk .tx'),
				added: tx('.dl-add .tx'), removed: tx('.dl-del .tx'), context: tx('.dl-ctx .tx'),
				more: more && !more.hidden ? more.textContent : '', json: li.querySelector('pre.input') !== null }; })`)
	}
	got := read()
	if len(got) != 5 {
		t.Fatalf("tool calls shown: %+v", got)
	}
	edit, multi, write, patch, bash := got[0], got[1], got[2], got[3], got[4]
	if edit.JSON || strings.Join(edit.Files, "|") != "calc.go" || strings.Join(edit.Removed, "|") != "-\treturn a - b" ||
		strings.Join(edit.Added, "|") != "+\treturn a + b" || strings.Join(edit.Context, "|") != " func add(a, b int) int {| }" {
		t.Errorf("Edit shown as %+v", edit)
	}
	if multi.JSON || strings.Join(multi.Hunks, "|") != "@@ edit 1 of 2 @@|@@ edit 2 of 2 @@" ||
		strings.Join(multi.Removed, "|") != "-# calc|-old usage" ||
		strings.Join(multi.Added, "|") != `+# calc <img src=x onerror="document.body.dataset.pwned=1">|+new usage` {
		t.Errorf("MultiEdit shown as %+v", multi)
	}
	if write.JSON || len(write.Added) != 40 || write.Added[0] != "+line 1 of the new file" || write.More != "Show 60 more lines" || len(write.Removed) != 0 {
		t.Errorf("Write shown as %d lines, more %q, first %q", len(write.Added), write.More, write.Added[:1])
	}
	if patch.JSON || strings.Join(patch.Removed, "|") != "-\tif add(1, 2) != -1 {" || strings.Join(patch.Added, "|") != "+\tif add(1, 2) != 3 {" ||
		!slices.Contains(patch.Files, "*** Update File: calc_test.go") || strings.Join(patch.Hunks, "|") != "@@ func TestAdd" {
		t.Errorf("apply_patch shown as %+v", patch)
	}
	if !bash.JSON || len(bash.Added)+len(bash.Removed) != 0 {
		t.Errorf("Bash shown as %+v", bash)
	}
	colours := browsertest.Eval[map[string]string](t, b, `(() => { const c = (s) => getComputedStyle(document.querySelector('#timeline ' + s)).color;
		return { add: c('.dl-add .tx'), del: c('.dl-del .tx'), addBg: getComputedStyle(document.querySelector('#timeline .dl-add')).backgroundColor }; })()`)
	if colours["add"] == colours["del"] || colours["addBg"] == "rgba(0, 0, 0, 0)" {
		t.Errorf("added and removed lines coloured %+v", colours)
	}
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('#timeline img').length`); n != 0 || browsertest.Eval[bool](t, b, `document.body.dataset.pwned === '1'`) {
		t.Fatal("markup in an edit became markup")
	}
	browsertest.Eval[bool](t, b, `(document.getElementById('timeline').scrollTop = document.querySelector('#timeline .ev[data-type=tool_use]').offsetTop, true)`)
	b.Screenshot(t, "dashboard-edit-diff.png")
	browsertest.Eval[bool](t, b, `([...document.querySelectorAll('#timeline .ev[data-type=tool_use]')][2].querySelector('.diff-block .more').click(), true)`)
	if got := read()[2]; len(got.Added) != 100 || got.Added[99] != "+line 100 of the new file" || got.More != "" {
		t.Fatalf("the whole write: %d lines, more %q", len(got.Added), got.More)
	}
	noPageErrors(t, b)
}

// CON-1: the new-run form's agent is picked from GET /v1/agents: every
// agent the server can run, with its version; one not installed is
// disabled, with the reason. A run started with the picker runs that
// agent. Screenshot: dashboard-agent-picker.png.
func TestCON1_AgentPicker(t *testing.T) {
	f := newConsoleFixture(t, nil)
	var agents api.AgentsResult
	if code := f.do(t, "GET", "/v1/agents", "", &agents); code != http.StatusOK {
		t.Fatalf("GET /v1/agents: %d", code)
	}
	b := openConsole(t, f)
	type option struct {
		Value    string `json:"value"`
		Text     string `json:"text"`
		Version  string `json:"version"`
		Disabled bool   `json:"disabled"`
	}
	opts := browsertest.Eval[[]option](t, b, `[...document.querySelectorAll('#new-agent option')].map(o => ({
		value: o.value, text: o.textContent, version: o.dataset.version, disabled: o.disabled }))`)
	if tag := browsertest.Eval[string](t, b, `document.getElementById('new-agent').tagName`); tag != "SELECT" {
		t.Fatalf("the agent field is a %s", tag)
	}
	var ids []string
	for _, o := range opts {
		ids = append(ids, o.Value)
	}
	var want []string
	for _, a := range agents.Agents {
		want = append(want, a.ID)
	}
	if !slices.Equal(ids, want) {
		t.Fatalf("picker lists %q, the server's agents are %q", ids, want)
	}
	for _, o := range opts {
		switch o.Value {
		case "versioned":
			if o.Text != "versioned 1.2.3" || o.Version != "1.2.3" || o.Disabled {
				t.Errorf("versioned: %+v", o)
			}
		case "missing":
			if o.Text != "missing — missing-cli not found on PATH" || !o.Disabled {
				t.Errorf("missing: %+v", o)
			}
		default:
			if o.Disabled {
				t.Errorf("%s disabled", o.Value)
			}
		}
	}
	// The list open, for the screenshot (a closed select shows one option,
	// and a headless browser draws no drop-down).
	browsertest.Eval[bool](t, b, `(() => { const s = document.getElementById('new-agent');
		s.size = s.options.length; s.style.position = 'absolute'; s.style.zIndex = '3'; s.style.height = 'auto'; return true; })()`)
	b.Screenshot(t, "dashboard-agent-picker.png")
	browsertest.Eval[bool](t, b, `(() => { const s = document.getElementById('new-agent');
		s.size = 0; s.style.position = s.style.zIndex = s.style.height = ''; return true; })()`)

	b.Do(t, "start a run of the versioned agent",
		chromedp.SetValue(chromedp.ID("new-agent"), "versioned"),
		chromedp.SendKeys(chromedp.ID("new-prompt"), "hello"),
		chromedp.Click(chromedp.CSS("#new-run button")))
	b.Wait(t, "its run open and done", `(() => { const id = document.getElementById('detail').dataset.runId;
		const r = id && document.querySelector('#runs-body tr[data-run-id="' + id + '"]');
		return r && r.querySelector('.agent').textContent === 'versioned' && r.dataset.status === 'completed'; })()`)
	noPageErrors(t, b)
}

// CON-1: internal events (a vendor's extensions) fold into one dimmed line
// per run of them, which opens on a click; "show internal events" shows
// them all; nothing in them overflows the timeline's column, not even a
// type name or a payload with no break. Screenshot:
// dashboard-internal-folded.png.
func TestCON1_InternalEventsFolded(t *testing.T) {
	f := newConsoleFixture(t, nil)
	b := openConsole(t, f)
	id := f.startWith(t, `{"agent":"chatty","prompt":"talk"}`)
	f.await(t, id)
	b.Do(t, "open the run", chromedp.Click(chromedp.CSS(rowSel(id)), chromedp.NodeVisible))
	b.Wait(t, "its timeline", `document.getElementById('detail').dataset.runId === `+browsertest.JS(id)+` &&
		document.querySelector('#timeline .ev[data-type=done]') !== null`)
	visible := `[...document.querySelectorAll('#timeline .ev-internal')].map(e => e.getClientRects().length > 0)`
	folds := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#timeline .ev-fold .fold-summary')].map(e => e.textContent)`)
	if len(folds) != 2 || folds[0] != "3 internal events: claude-code:api_retry, claude-code:status, codex:token_count" ||
		!strings.HasPrefix(folds[1], "1 internal event: claude-code:an_extremely_long") {
		t.Fatalf("folds %q", folds)
	}
	order := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#timeline > li')].map(e => e.classList.contains('ev-fold') ? 'fold' : e.dataset.type)`)
	if strings.Join(order, ",") != "text,fold,text,fold,done" {
		t.Fatalf("timeline %q", order)
	}
	if got := browsertest.Eval[[]bool](t, b, visible); !slices.Equal(got, []bool{false, false, false, false}) {
		t.Fatalf("internal events shown folded: %v", got)
	}
	b.Do(t, "open the first fold", chromedp.Click(chromedp.CSS(`#timeline .ev-fold .fold-summary`), chromedp.NodeVisible))
	if got := browsertest.Eval[[]bool](t, b, visible); !slices.Equal(got, []bool{true, true, true, false}) {
		t.Fatalf("after a click on the first fold: %v", got)
	}
	b.Screenshot(t, "dashboard-internal-folded.png")
	b.Do(t, "show internal events", chromedp.Click(chromedp.ID("show-internal"), chromedp.NodeVisible))
	if got := browsertest.Eval[[]bool](t, b, visible); !slices.Equal(got, []bool{true, true, true, true}) {
		t.Fatalf("with the toggle: %v", got)
	}
	overflow := browsertest.Eval[[]string](t, b, `(() => { const out = [], tl = document.getElementById('timeline');
		if (tl.scrollWidth > tl.clientWidth) out.push('timeline ' + tl.scrollWidth + ' > ' + tl.clientWidth);
		for (const e of tl.querySelectorAll('.ev, .ev .label, .ev .body, .ev pre')) {
			if (e.scrollWidth > e.clientWidth + 1) out.push((e.closest('.ev').dataset.type) + ' ' + e.className + ' ' + e.scrollWidth + ' > ' + e.clientWidth);
			const r = e.getBoundingClientRect(), box = tl.getBoundingClientRect();
			if (r.right > box.right + 1) out.push(e.className + ' ends at ' + r.right + ', past ' + box.right);
		}
		return out; })()`)
	if len(overflow) > 0 {
		t.Fatalf("overflow: %q", overflow)
	}
	b.Do(t, "hide them again", chromedp.Click(chromedp.ID("show-internal"), chromedp.NodeVisible))
	if got := browsertest.Eval[[]bool](t, b, visible); !slices.Equal(got, []bool{true, true, true, false}) {
		t.Fatalf("without the toggle: %v", got)
	}
	noPageErrors(t, b)
}

// CON-1: the header's totals are those of the runs the filter shows, "of
// N" when it hides some; a cancelled run counts as cancelled, not failed;
// a run's view says how many tool calls it made and how many were denied.
func TestCON1_TotalsFollowFilter(t *testing.T) {
	f := newConsoleFixture(t, nil)
	b := openConsole(t, f)
	costly := []string{f.startWith(t, `{"agent":"costly","prompt":"a"}`), f.startWith(t, `{"agent":"costly","prompt":"b"}`)}
	quick := f.startWith(t, `{"agent":"quick","prompt":"2"}`)
	hang := f.startWith(t, `{"agent":"hang","prompt":"wait"}`)
	f.await(t, append(costly, quick)...)
	f.waitSeq(t, hang, 1)
	f.do(t, "POST", "/v1/runs/"+hang+"/cancel", "", nil)
	f.await(t, hang)
	totals := `(() => { const v = (id) => document.getElementById('usage-' + id).textContent;
		const shown = (id) => !document.getElementById('usage-' + id).parentElement.hidden;
		return [v('runs'), v('completed'), v('failed'), shown('cancelled') ? v('cancelled') : '-', v('in'), v('out'), v('tools'), v('cost')].join(' '); })()`
	b.Wait(t, "the totals of every run", totals+` === '4 3 0 1 2,400 680 4 $1.00'`)
	filter := func(text, status string) {
		browsertest.Eval[bool](t, b, `(() => {
			const q = document.getElementById('filter-text'), s = document.getElementById('filter-status');
			q.value = `+browsertest.JS(text)+`; q.dispatchEvent(new Event('input'));
			s.value = `+browsertest.JS(status)+`; return s.dispatchEvent(new Event('change')); })()`)
	}
	filter("costly", "")
	b.Wait(t, "the totals of the costly runs", totals+` === '2 of 4 2 0 - 2,400 680 4 $1.00'`)
	filter("quick", "")
	b.Wait(t, "the totals of the quick run", totals+` === '1 of 4 1 0 - 0 0 0 $0.00'`)
	filter("", "cancelled")
	b.Wait(t, "the cancelled run alone", totals+` === '1 of 4 0 0 1 0 0 0 $0.00' &&
		document.querySelector('#runs-body tr.run').dataset.runId === `+browsertest.JS(hang)+` &&
		document.querySelector('#runs-body tr.run .status').textContent === 'cancelled'`)
	filter("", "")
	b.Wait(t, "every run again", totals+` === '4 3 0 1 2,400 680 4 $1.00'`)

	b.Do(t, "open a costly run", chromedp.Click(chromedp.CSS(rowSel(costly[0])), chromedp.NodeVisible))
	b.Wait(t, "its summary", `document.getElementById('detail-summary').textContent.includes('2 tool calls, 0 denied') &&
		document.getElementById('detail-summary').textContent.includes('$0.50')`)
	noPageErrors(t, b)
}

// CON-1: durations in full, a prompt's first line in the list (the whole
// prompt on hover and in the run's view) using the width the page has,
// and a cost for every run with tokens: drover's estimate for a model it
// has a price for, "no price for MODEL" for one it has none for.
func TestCON1_DurationsPromptsAndCost(t *testing.T) {
	f := newConsoleFixture(t, nil)
	b := openConsole(t, f)
	for ms, want := range map[int]string{850: "850ms", 12345: "12.3s", 72000: "1m 12s", 65000: "1m 05s", 7380000: "2h 03m", 93784000: "1d 02h"} {
		if got := browsertest.Eval[string](t, b, fmt.Sprintf(`fmtDuration(%d)`, ms)); got != want {
			t.Errorf("fmtDuration(%d) = %q, want %q", ms, got, want)
		}
	}
	if got := browsertest.Eval[string](t, b, `statusLabel({status: 'failed', doneStatus: 'error', outcome: 'timed_out'}) + ' ' +
		statusLabel({status: 'failed', doneStatus: 'interrupted'}) + ' ' + statusLabel({status: 'completed', doneStatus: 'max_turns'})`); got != "timed_out cancelled max_turns" {
		t.Errorf("outcomes %q", got)
	}

	prompt := "fix the flaky test in server/ and make sure nothing else breaks\nthen run go test ./... and report"
	id := f.startWith(t, fmt.Sprintf(`{"agent":"quick","prompt":%s}`, jsString(prompt)))
	priced := f.startWith(t, `{"agent":"priced","prompt":"priced","options":{"model":"gpt-5"}}`)
	unpriced := f.startWith(t, `{"agent":"priced","prompt":"unpriced","options":{"model":"gpt-5.5"}}`)
	f.await(t, id, priced, unpriced)
	b.Wait(t, "the runs listed, ended", `[...document.querySelectorAll('#runs-body tr.run')].map(r => r.dataset.status).join() === 'completed,completed,completed'`)
	cell := browsertest.JS(rowSel(id) + " td.prompt")
	got := browsertest.Eval[map[string]any](t, b, `(() => { const td = document.querySelector(`+cell+`);
		return { first: td.querySelector('.first').textContent, title: td.title, fits: td.scrollWidth <= td.clientWidth,
			list: document.getElementById('list').getBoundingClientRect().width, page: document.getElementById('app').clientWidth }; })()`)
	if got["first"] != strings.SplitN(prompt, "\n", 2)[0]+" …" || got["title"] != prompt || got["fits"] != true {
		t.Errorf("prompt cell %+v", got)
	}
	if list, page := got["list"].(float64), got["page"].(float64); list < 0.9*page {
		t.Errorf("with no run open the list is %.0f px of %.0f", list, page)
	}
	costs := browsertest.Eval[map[string]string](t, b, `(() => { const c = (id) => document.querySelector('#runs-body tr[data-run-id="' + id + '"] td:last-child');
		return { priced: c(`+browsertest.JS(priced)+`).textContent, unpriced: c(`+browsertest.JS(unpriced)+`).textContent,
			title: c(`+browsertest.JS(unpriced)+`).title }; })()`)
	// The run record carries the cost, and "~" once it carries the flag
	// too (docs/limits.md).
	if (costs["priced"] != "~$0.0063" && costs["priced"] != "$0.0063") || costs["unpriced"] != "no price" || !strings.HasPrefix(costs["title"], "no price for gpt-5.5") {
		t.Errorf("costs %+v", costs)
	}
	if got := browsertest.Eval[string](t, b, `document.getElementById('usage-unpriced').textContent`); got != "+ 1 run without a price" {
		t.Errorf("the header says %q of the run without a price", got)
	}

	b.Do(t, "open the run without a price", chromedp.Click(chromedp.CSS(rowSel(unpriced)), chromedp.NodeVisible))
	b.Wait(t, "its cost named", `document.getElementById('detail-summary').textContent.includes('no price for gpt-5.5')`)
	b.Do(t, "open the long prompt's run", chromedp.Click(chromedp.CSS(rowSel(id)), chromedp.NodeVisible))
	b.Wait(t, "its whole prompt", `document.getElementById('detail-prompt').textContent === `+browsertest.JS(prompt))
	if solo := browsertest.Eval[bool](t, b, `document.getElementById('app').classList.contains('solo')`); solo {
		t.Error("the list keeps the whole width beside an open run")
	}
	noPageErrors(t, b)
}
