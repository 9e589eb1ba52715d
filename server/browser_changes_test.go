package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/internal/testkit/browsertest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
)

// writer is the agent of the change tests: it does what its prompt's
// lines say, in its working directory (a run's workspace), then ends.
//
//	write PATH: TEXT   writes TEXT and a newline to PATH
//	sub PATH OLD|NEW   replaces OLD by NEW in PATH
//	lines PATH N       writes N numbered lines to PATH
//	binary PATH        writes bytes git takes for binary to PATH
//	rename FROM TO     renames FROM to TO
//	remove PATH        removes PATH
//	wait               waits for a gate from the test
//
// Other lines (a revise's message and comments) are ignored.
func writer(g gates) *agenttest.Agent {
	return &agenttest.Agent{Name: "writer", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		dir := req.Options.Cwd
		fail := func(err error) {
			y(drover.Event{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: "API_ERROR", Message: err.Error()}}, nil)
			y(done(drover.StatusError), nil)
		}
		n := 0
		for line := range strings.SplitSeq(req.Prompt, "\n") {
			verb, rest, _ := strings.Cut(line, " ")
			var err error
			switch verb {
			case "write":
				path, text, _ := strings.Cut(rest, ": ")
				err = writeFile(filepath.Join(dir, path), text+"\n")
			case "sub":
				path, subst, _ := strings.Cut(rest, " ")
				old, repl, _ := strings.Cut(subst, "|")
				var b []byte
				if b, err = os.ReadFile(filepath.Join(dir, path)); err == nil {
					err = writeFile(filepath.Join(dir, path), strings.Replace(string(b), old, repl, 1))
				}
			case "lines":
				path, count, _ := strings.Cut(rest, " ")
				var b strings.Builder
				for i := range atoi(count) {
					b.WriteString("line " + itoa(i+1) + " of a long file\n")
				}
				err = writeFile(filepath.Join(dir, path), b.String())
			case "binary":
				err = writeFile(filepath.Join(dir, rest), "\x00\x01\x02PNG\x00binary\xff\xfe")
			case "rename":
				from, to, _ := strings.Cut(rest, " ")
				err = os.Rename(filepath.Join(dir, from), filepath.Join(dir, to))
			case "remove":
				err = os.Remove(filepath.Join(dir, rest))
			case "wait":
				select {
				case gate := <-g.ch:
					select {
					case <-gate:
					case <-ctx.Done():
						return
					}
				case <-ctx.Done():
					return
				}
				continue
			default:
				continue
			}
			if err != nil {
				fail(err)
				return
			}
			n++
		}
		if y(text("did "+itoa(n)+" things"), nil) {
			y(done(drover.StatusSuccess), nil)
		}
	}}
}

func writeFile(path, s string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(s), 0o644)
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func itoa(n int) string { return strconv.Itoa(n) }

// jsString is s as a JSON string.
func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// newTestServer serves srv as the fixture does.
func newTestServer(t testing.TB, srv *server.Server) *httptest.Server {
	ts := httptest.NewUnstartedServer(srv)
	ts.Config = srv.HTTPServer()
	ts.Start()
	t.Cleanup(func() {
		srv.Close()
		ts.CloseClientConnections()
		ts.Close()
	})
	return ts
}

// git runs git in dir and returns its output, failing the test on an
// error.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
		"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newRepo makes a git repository with one commit: README.md and
// notes.txt (ten lines).
func newRepo(t testing.TB) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	dir := filepath.Join(t.TempDir(), "project")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "-b", "main")
	var notes strings.Builder
	for i := range 10 {
		notes.WriteString("note " + itoa(i+1) + "\n")
	}
	for name, s := range map[string]string{"README.md": "# project\n", "notes.txt": notes.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "first")
	return dir
}

// changeFixture is a server whose supervisor keeps workspaces, with the
// writer agent, and a git repository to work in.
type changeFixture struct {
	*fixture
	repo       string
	workspaces string
}

func newChangeFixture(t *testing.T, maxPatch int) *changeFixture {
	t.Helper()
	repo := newRepo(t)
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	g := gates{ch: make(chan chan struct{}, 16)}
	reg := drover.NewRegistry()
	if err := reg.Register(writer(g)); err != nil {
		t.Fatal(err)
	}
	ws := t.TempDir()
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{Poll: 20 * time.Millisecond, Workspaces: ws, MaxPatch: maxPatch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	srv := server.New(api.NewLocal(sup, api.Config{Poll: 50 * time.Millisecond, AllowAutonomous: true}), server.Config{Poll: 100 * time.Millisecond})
	ts := newTestServer(t, srv)
	return &changeFixture{fixture: &fixture{st: st, sup: sup, srv: srv, ts: ts, gates: g}, repo: repo, workspaces: ws}
}

// run starts a writer run in the repository with options and waits for
// its end.
func (f *changeFixture) run(t *testing.T, prompt, worktree string) string {
	t.Helper()
	body := `{"agent":"writer","prompt":` + jsString(prompt) + `,"options":{"cwd":` + jsString(f.repo) + `,"worktree":` + worktree + `}}`
	var res runs.Started
	if code := f.do(t, "POST", "/v1/runs", body, &res); code != http.StatusCreated {
		t.Fatalf("POST /v1/runs %s: %d", body, code)
	}
	f.await(t, res.RunID)
	return res.RunID
}

func (f *changeFixture) change(t *testing.T, id string) store.Change {
	t.Helper()
	var c store.Change
	if code := f.do(t, "GET", "/v1/runs/"+id+"/change", "", &c); code != http.StatusOK {
		t.Fatalf("GET change of %s: %d", id, code)
	}
	return c
}

// started starts a writer run in the repository with options (the JSON
// of options.worktree) without waiting for it.
func (f *changeFixture) started(t *testing.T, prompt, worktree string) string {
	t.Helper()
	body := `{"agent":"writer","prompt":` + jsString(prompt) + `,"options":{"cwd":` + jsString(f.repo) + `,"worktree":` + worktree + `}}`
	var res runs.Started
	if code := f.do(t, "POST", "/v1/runs", body, &res); code != http.StatusCreated {
		t.Fatalf("POST /v1/runs %s: %d", body, code)
	}
	return res.RunID
}

func (f *changeFixture) read(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.repo, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// openChange selects run id in the list and waits for its change.
func openChange(t *testing.T, b *browsertest.Browser, id, state string) {
	t.Helper()
	b.Do(t, "select "+id, chromedp.Click(chromedp.CSS(rowSel(id)), chromedp.NodeVisible))
	b.Wait(t, "the change of "+id+", "+state, `(() => { const c = document.getElementById('change');
		return !c.hidden && c.dataset.runId === `+browsertest.JS(id)+` && c.dataset.state === `+browsertest.JS(state)+`; })()`)
}

// diffLine is the selector of the first diff line whose text is text.
func diffLine(t *testing.T, b *browsertest.Browser, text string) string {
	t.Helper()
	i := browsertest.Eval[string](t, b, `(() => { const l = [...document.querySelectorAll('#diff .dl')].find(e => e.querySelector('.tx').textContent === `+browsertest.JS(text)+`);
		return l ? l.dataset.i : ''; })()`)
	if i == "" {
		t.Fatalf("no diff line %q", text)
	}
	return `#diff .dl[data-i="` + i + `"]`
}

// WS-3, WS-2: in a real headless Chromium, a run's change is reviewed and
// decided from its view. The diff shows its files (a rename as from → to,
// a binary file named, not shown) coloured as git colours it, and the
// check's result; Apply writes it into the repository's working tree;
// a second change to the same lines is refused, naming the file, with
// the tree left as it was; Discard removes the workspace; Merge makes a
// commit; Request changes with a comment on a line starts a new run whose
// prompt carries the comment. The run list shows each run's change.
// Screenshots: testartifacts/dashboard-change.png, dashboard-revise.png.
func TestWS3_DashboardReviewsChanges(t *testing.T) {
	f := newChangeFixture(t, 0)
	applied := f.run(t, "sub notes.txt note 3|note three, by A\nwrite src/app.go: package app\nbinary logo.png\nrename README.md README.markdown",
		`{"check":"echo checking the change; echo it failed >&2; exit 3"}`)
	conflicting := f.run(t, "sub notes.txt note 3|note 3, by B", `{"check":"echo all good"}`)
	discarded := f.run(t, "write scratch.txt: thrown away", `{}`)
	revised := f.run(t, "lines feature.txt 5", `{}`)
	merged := f.run(t, "write merged.txt: merged in", `{}`)
	inPlace := f.run(t, "write here.txt: in place", "null")

	b := browsertest.New(t)
	b.Do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.Wait(t, "the dashboard, live", `document.getElementById('conn').dataset.state === 'live'`)

	// The list shows each run's change.
	b.Wait(t, "the changes in the list", `(() => { const s = (id) => document.querySelector('#runs-body tr[data-run-id="' + id + '"] .chg-line')?.textContent;
		return s(`+browsertest.JS(applied)+`) === 'review 4 files +2 −1' && s(`+browsertest.JS(discarded)+`) === 'review 1 file +1 −0' &&
			s(`+browsertest.JS(inPlace)+`) === 'in place 1 file +1 −0'; })()`)

	// The diff, coloured; the files; the failed check.
	openChange(t, b, applied, "pending")
	got := browsertest.Eval[map[string]any](t, b, `(() => {
		const q = (s) => document.querySelector(s), all = (s) => [...document.querySelectorAll(s)];
		const rgb = (s) => getComputedStyle(q(s)).color.match(/\d+/g).map(Number);
		return {
			state: q('#change-state').textContent,
			files: all('#change-files-body tr').map(r => [...r.cells].map(c => c.textContent).join(' | ')),
			headers: all('#diff .dl-file .tx').map(e => e.textContent),
			added: all('#diff .dl-add .tx').map(e => e.textContent),
			removed: all('#diff .dl-del .tx').map(e => e.textContent),
			binary: all('#diff .dl-binary .tx').map(e => e.textContent),
			hunks: all('#diff .dl-hunk').length,
			add: rgb('#diff .dl-add .tx'), del: rgb('#diff .dl-del .tx'), hunk: rgb('#diff .dl-hunk .tx'),
			bold: getComputedStyle(q('#diff .dl-file .tx')).fontWeight,
			font: getComputedStyle(q('#diff')).fontFamily,
			check: q('#change-check').textContent,
			checkOpen: q('#change-check details').open,
			buttons: all('#change-actions button').filter(b => !b.hidden).map(b => b.textContent),
		}; })()`)
	t.Logf("change view: %v", got)
	wantFiles := []string{"README.md → README.markdown | renamed | +0 −0", "logo.png | added | binary", "notes.txt | modified | +1 −1", "src/app.go | added | +1 −0"}
	if strings.Join(anyStrings(got["files"]), "\n") != strings.Join(wantFiles, "\n") {
		t.Errorf("files %q, want %q", got["files"], wantFiles)
	}
	for _, h := range []string{"diff --git a/README.md b/README.markdown", "diff --git a/logo.png b/logo.png", "diff --git a/notes.txt b/notes.txt", "diff --git a/src/app.go b/src/app.go"} {
		if !slices.Contains(anyStrings(got["headers"]), h) {
			t.Errorf("no file header %q in %q", h, got["headers"])
		}
	}
	if !slices.Contains(anyStrings(got["added"]), "+note three, by A") || !slices.Contains(anyStrings(got["added"]), "+package app") ||
		!slices.Equal(anyStrings(got["removed"]), []string{"-note 3"}) || !slices.Equal(anyStrings(got["binary"]), []string{"binary file, not shown"}) {
		t.Errorf("diff lines: added %q, removed %q, binary %q", got["added"], got["removed"], got["binary"])
	}
	green, red, cyan := anyInts(got["add"]), anyInts(got["del"]), anyInts(got["hunk"])
	if !(green[1] > green[0] && green[1] > green[2]) || !(red[0] > red[1] && red[0] > red[2]) || !(cyan[1] > cyan[0] && cyan[2] > cyan[0]) {
		t.Errorf("colours: added %v, removed %v, hunk headers %v; want green, red, cyan", green, red, cyan)
	}
	if got["bold"] != "700" || !strings.Contains(got["font"].(string), "monospace") {
		t.Errorf("file headers' weight %v, the diff's font %v", got["bold"], got["font"])
	}
	if c := got["check"].(string); !strings.Contains(c, "failed, exit 3") || !strings.Contains(c, "it failed") || got["checkOpen"] != true {
		t.Errorf("check %q (open %v)", c, got["checkOpen"])
	}
	if want := []string{"Apply", "Merge", "Request changes", "Discard"}; !slices.Equal(anyStrings(got["buttons"]), want) {
		t.Errorf("buttons %q, want %q", got["buttons"], want)
	}
	top(t, b)
	b.Screenshot(t, "dashboard-change.png")

	// Apply: the change is in the working tree, and decided.
	b.Do(t, "apply", chromedp.Click(chromedp.ID("change-apply"), chromedp.NodeVisible))
	b.Wait(t, "applied", `document.getElementById('change').dataset.state === 'applied' &&
		document.getElementById('change-result').textContent.startsWith('Applied') &&
		document.querySelector('#change-decisions li[data-action=applied]')?.textContent.includes('by dashboard') &&
		[...document.querySelectorAll('#change-actions button')].every(b => b.hidden || b.closest('[hidden]'))`)
	if s := f.read(t, "notes.txt"); !strings.Contains(s, "note three, by A\n") {
		t.Fatalf("notes.txt after apply:\n%s", s)
	}
	if s := f.read(t, "src/app.go"); s != "package app\n" {
		t.Fatalf("src/app.go after apply: %q", s)
	}
	if _, err := os.Stat(filepath.Join(f.repo, "README.md")); !os.IsNotExist(err) {
		t.Fatalf("README.md after apply (renamed away): %v", err)
	}
	b.Wait(t, "the list says applied", `document.querySelector(`+browsertest.JS(rowSel(applied)+" .chg")+`)?.dataset.state === 'applied'`)

	// A change to the same lines: refused, naming the file; nothing changed.
	before := f.read(t, "notes.txt")
	openChange(t, b, conflicting, "pending")
	if c := browsertest.Eval[string](t, b, `document.getElementById('change-check').textContent`); !strings.Contains(c, "passed") {
		t.Errorf("check %q, want passed", c)
	}
	b.Do(t, "apply the conflicting change", chromedp.Click(chromedp.ID("change-apply"), chromedp.NodeVisible))
	b.Wait(t, "the conflict, named", `document.getElementById('change-error').textContent.includes('CONFLICT') &&
		document.getElementById('change-error').textContent.includes('notes.txt') &&
		document.getElementById('change').dataset.state === 'pending'`)
	t.Logf("the conflict, as shown: %q", browsertest.Eval[string](t, b, `document.getElementById('change-error').textContent`))
	if after := f.read(t, "notes.txt"); after != before {
		t.Fatalf("notes.txt changed by a refused apply:\n%s\nwas\n%s", after, before)
	}
	var c store.Change
	f.do(t, "GET", "/v1/runs/"+conflicting+"/change", "", &c)
	if c.State != store.ChangePending {
		t.Fatalf("the refused change is %s", c.State)
	}

	// Discard, pressed twice: the workspace is gone.
	ws := f.change(t, discarded).Workspace
	if _, err := os.Stat(ws); err != nil {
		t.Fatalf("workspace before discard: %v", err)
	}
	openChange(t, b, discarded, "pending")
	b.Do(t, "discard", chromedp.Click(chromedp.ID("change-discard"), chromedp.NodeVisible))
	b.Wait(t, "discard asks again", `document.getElementById('change-discard').dataset.armed === '1'`)
	b.Do(t, "discard again", chromedp.Click(chromedp.ID("change-discard"), chromedp.NodeVisible))
	b.Wait(t, "discarded", `document.getElementById('change').dataset.state === 'discarded' &&
		[...document.querySelectorAll('#change-facts div')].some(d => d.textContent === 'workspaceremoved')`)
	if _, err := os.Stat(ws); !os.IsNotExist(err) {
		t.Fatalf("workspace %s after discard: %v", ws, err)
	}

	// Merge: a commit on the current branch.
	openChange(t, b, merged, "pending")
	b.Do(t, "merge", chromedp.Click(chromedp.ID("change-merge"), chromedp.NodeVisible))
	b.Wait(t, "merged", `document.getElementById('change').dataset.state === 'merged' &&
		document.getElementById('change-result').textContent.includes('as commit')`)
	if log := git(t, f.repo, "log", "--format=%s", "-1", "--", "merged.txt"); strings.TrimSpace(log) != "write merged.txt: merged in" {
		t.Fatalf("the merge's commit: %q", log)
	}

	// Request changes, with a comment on a line.
	openChange(t, b, revised, "pending")
	b.Do(t, "click line 2", chromedp.Click(chromedp.CSS(diffLine(t, b, "+line 2 of a long file")), chromedp.NodeVisible))
	b.Do(t, "comment on it",
		chromedp.SendKeys(chromedp.CSS("#diff .comment-edit input"), "say which file", chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS("#diff .comment-edit button[type=submit]")))
	b.Wait(t, "the comment, under its line and in the request", `document.querySelector('#diff .comment .text')?.textContent === 'say which file' &&
		!document.getElementById('revise').hidden &&
		document.querySelector('#revise-comments li')?.textContent.startsWith('feature.txt:2: say which file')`)
	top(t, b)
	b.Screenshot(t, "dashboard-revise.png")
	b.Do(t, "say what to change",
		chromedp.SendKeys(chromedp.ID("revise-message"), "Shorter, please.\nwrite feature.txt: short"),
		chromedp.Click(chromedp.CSS("#revise button[type=submit]")))
	b.Wait(t, "the new run, shown", `(() => { const id = document.getElementById('detail').dataset.runId;
		return id && id !== `+browsertest.JS(revised)+` && document.getElementById('change').dataset.runId === id; })()`)
	next := browsertest.Eval[string](t, b, `document.getElementById('detail').dataset.runId`)
	var g api.GetResult
	if code := f.do(t, "GET", "/v1/runs/"+next, "", &g); code != http.StatusOK || g.Run == nil {
		t.Fatalf("GET the new run: %d", code)
	}
	if want := "Shorter, please.\nwrite feature.txt: short\n\nComments on lines of the diff:\nfeature.txt:2: say which file"; g.Run.Prompt != want {
		t.Fatalf("the new run's prompt %q, want %q", g.Run.Prompt, want)
	}
	f.await(t, next)
	b.Wait(t, "the new run's change, building on the last", `document.getElementById('change').dataset.state === 'pending' &&
		[...document.querySelectorAll('#change-facts a')].some(a => a.textContent === `+browsertest.JS(revised)+`)`)
	if c := f.change(t, revised); c.State != store.ChangeRevised || len(c.Decisions) != 1 || c.Decisions[0].Detail != next || c.Decisions[0].By != "dashboard" {
		t.Fatalf("the revised run's change: %s %+v", c.State, c.Decisions)
	}
	if s := browsertest.Eval[string](t, b, `document.querySelector('#diff .dl-add .tx')?.textContent`); s != "+short" {
		t.Fatalf("the revision's diff starts %q", s)
	}

	// A run in place in the repository: its change, no buttons.
	openChange(t, b, inPlace, "pending")
	if n := browsertest.Eval[int](t, b, `[...document.querySelectorAll('#change-actions button')].filter(b => !b.hidden && !b.closest('[hidden]')).length`); n != 0 {
		t.Fatalf("%d buttons for a change in place", n)
	}

	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}

// top scrolls the page to its top, for a screenshot (a sticky header
// scrolled would be drawn mid-page).
func top(t *testing.T, b *browsertest.Browser) {
	t.Helper()
	browsertest.Eval[bool](t, b, `(window.scrollTo(0, 0), true)`)
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

func anyInts(v any) []int {
	var out []int
	for _, x := range v.([]any) {
		out = append(out, int(x.(float64)))
	}
	return out
}

// WS-4: in a real headless Chromium, runs picked in the list compare side
// by side: status, change, files changed, lines, check, cost, duration,
// each run a link to its view; #compare=ID,ID opens the same, and a
// parent's children compare from its view.
// Screenshot: testartifacts/dashboard-compare.png.
func TestWS4_DashboardComparesRuns(t *testing.T) {
	f := newChangeFixture(t, 0)
	one := f.run(t, "sub notes.txt note 3|note three\nwrite src/one.go: package one", `{"check":"echo ok"}`)
	two := f.run(t, "sub notes.txt note 3|note 3, twice\nsub notes.txt note 4|note 4, twice\nbinary two.bin", `{"check":"echo broken; exit 2"}`)
	plain := f.run(t, "nothing to do", "null") // in the repository, changing nothing

	b := browsertest.New(t)
	b.Do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.Wait(t, "the dashboard, live, with the changes", `document.getElementById('conn').dataset.state === 'live' &&
		document.querySelectorAll('#runs-body tr.run .chg-line').length === 3 &&
		document.querySelector(`+browsertest.JS(rowSel(plain)+" .chg")+`).textContent === 'no change'`)
	if browsertest.Eval[bool](t, b, `!document.getElementById('compare-picked').disabled`) {
		t.Fatal("Compare is enabled with no run picked")
	}
	b.Do(t, "pick two runs",
		chromedp.Click(chromedp.CSS(rowSel(one)+" input.pick"), chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS(rowSel(two)+" input.pick"), chromedp.NodeVisible))
	if sel := browsertest.Eval[string](t, b, `document.getElementById('detail').dataset.runId || ''`); sel != "" {
		t.Fatalf("picking a run selected %s", sel)
	}
	b.Do(t, "compare them", chromedp.Click(chromedp.ID("compare-picked"), chromedp.NodeVisible))
	table := func() map[string][]string {
		return browsertest.Eval[map[string][]string](t, b, `(() => { const out = {};
			out.runs = [...document.querySelectorAll('#compare-table thead th[data-run-id]')].map(th => th.dataset.runId);
			for (const tr of document.querySelectorAll('#compare-table tbody tr')) out[tr.dataset.metric] = [...tr.querySelectorAll('td')].map(td => td.textContent);
			return out; })()`)
	}
	b.Wait(t, "the comparison", `!document.getElementById('compare').hidden && document.getElementById('detail').hidden &&
		document.querySelectorAll('#compare-table thead th[data-run-id]').length === 2 && location.hash.startsWith('#compare=')`)
	got := table()
	t.Logf("compare: %v", got)
	want := map[string][]string{
		"runs":          {one, two},
		"status":        {"completed", "completed"},
		"change":        {"pending review", "pending review"},
		"files changed": {"2", "2"},
		"lines":         {"+2 −1", "+2 −2"},
		"check":         {"passed", "failed, exit 2"},
	}
	for k, w := range want {
		if !slices.Equal(got[k], w) {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if d := got["duration"]; len(d) != 2 || d[0] == "" || d[0] == "—" || !strings.HasSuffix(d[0], "ms") && !strings.HasSuffix(d[0], " s") {
		t.Errorf("durations %q", d)
	}
	if c := got["cost"]; len(c) != 2 {
		t.Errorf("costs %q", c)
	}
	top(t, b)
	b.Screenshot(t, "dashboard-compare.png")

	// The address names the comparison: opened anew, it shows it again,
	// with a run that has no change among them.
	b.Do(t, "open a comparison by address", chromedp.Navigate(f.ts.URL+"/#compare="+one+","+plain))
	b.Wait(t, "the comparison by address", `document.querySelectorAll('#compare-table thead th[data-run-id]').length === 2 &&
		document.querySelector('#compare-table tr[data-metric=change] td:last-child')?.textContent === 'no change'`)
	// A run's link opens it.
	b.Do(t, "open a run from the comparison", chromedp.Click(chromedp.CSS(`#compare-table thead th[data-run-id=`+browsertest.JS(one)+`] a`), chromedp.NodeVisible))
	b.Wait(t, "the run, its change", `document.getElementById('compare').hidden && !document.getElementById('detail').hidden &&
		document.getElementById('change').dataset.runId === `+browsertest.JS(one)+` && location.hash === '#run=' + `+browsertest.JS(one))

	// A parent's children compare from its view.
	gate := make(chan struct{})
	f.gates.ch <- gate
	// (A child's directories narrow its parent's: the parent works where
	// the workspaces are, in no repository.)
	var started runs.Started
	if code := f.do(t, "POST", "/v1/runs", `{"agent":"writer","prompt":"wait","options":{"cwd":`+jsString(f.workspaces)+`}}`, &started); code != http.StatusCreated {
		t.Fatalf("start the parent: %d", code)
	}
	parent := started.RunID
	var kids []string
	for _, p := range []string{"write a.txt: a", "write b.txt: b"} {
		var res struct {
			runs.Started
			Error api.Error `json:"error"`
		}
		body := `{"agent":"writer","prompt":` + jsString(p) + `,"parent":` + jsString(parent) + `,"options":{"cwd":` + jsString(f.repo) + `,"worktree":{}}}`
		if code := f.do(t, "POST", "/v1/runs", body, &res); code != http.StatusCreated {
			close(gate)
			t.Fatalf("start a child: %d %+v", code, res.Error)
		}
		kids = append(kids, res.RunID)
	}
	f.await(t, kids...)
	b.Do(t, "select the parent", chromedp.Click(chromedp.CSS(rowSel(parent)), chromedp.NodeVisible))
	b.Wait(t, "the parent, its children", `document.getElementById('detail').dataset.runId === `+browsertest.JS(parent)+` &&
		[...document.querySelectorAll('#detail-links a')].some(a => a.textContent === 'compare them')`)
	// Clicked in the page: the parent's links are drawn again as its
	// children's statuses change, and a node found by the driver may be
	// gone by the time it clicks it.
	b.Wait(t, "compare the children", `(() => { const a = document.querySelector('#detail-links a[href^="#compare="]'); a?.click(); return !!a })()`)
	b.Wait(t, "the children compared", `[...document.querySelectorAll('#compare-table thead th[data-run-id]')].map(th => th.dataset.runId).join() === `+
		browsertest.JS(kids[0]+","+kids[1]))
	close(gate)
	f.await(t, parent)
	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}

// WS-1: in a real headless Chromium, the new-run form starts a run in a
// workspace of its own (options.worktree: base, check); its change is
// "working" while it runs, then waits for review with the check's result.
// A base that names no commit is refused, said in the form.
func TestWS1_DashboardStartsRunInWorkspace(t *testing.T) {
	f := newChangeFixture(t, 0)
	b := browsertest.New(t)
	b.Do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.Wait(t, "the dashboard, live", `document.getElementById('conn').dataset.state === 'live'`)
	if !browsertest.Eval[bool](t, b, `['new-base', 'new-dirty', 'new-check'].every(id => document.getElementById(id).disabled)`) {
		t.Fatal("the workspace's options are enabled without a workspace")
	}
	b.Do(t, "ask for a workspace from a base that does not exist",
		chromedp.SendKeys(chromedp.ID("new-agent"), "writer", chromedp.NodeVisible),
		chromedp.SendKeys(chromedp.ID("new-cwd"), f.repo),
		chromedp.SendKeys(chromedp.ID("new-prompt"), "wait\nwrite form.txt: from the form"),
		chromedp.Click(chromedp.ID("new-worktree")),
		chromedp.SendKeys(chromedp.ID("new-base"), "no-such-branch"),
		chromedp.Click(chromedp.CSS("#new-run button[type=submit]")))
	b.Wait(t, "the refusal", `document.getElementById('new-error').textContent.includes('no-such-branch')`)

	gate := make(chan struct{})
	f.gates.ch <- gate
	b.Do(t, "start it from main, with a check",
		chromedp.SetValue(chromedp.ID("new-base"), "main"),
		chromedp.SendKeys(chromedp.ID("new-check"), "cat form.txt"),
		chromedp.Click(chromedp.CSS("#new-run button[type=submit]")))
	b.Wait(t, "the run, working in its workspace", `(() => { const c = document.getElementById('change');
		return !c.hidden && c.dataset.state === 'open' && document.getElementById('change-state').textContent === 'working' &&
			[...document.querySelectorAll('#change-facts dd')].some(d => d.textContent.startsWith('drover/run_')); })()`)
	id := browsertest.Eval[string](t, b, `document.getElementById('detail').dataset.runId`)
	var g api.GetResult
	if code := f.do(t, "GET", "/v1/runs/"+id, "", &g); code != http.StatusOK || g.Run == nil {
		t.Fatalf("GET the run: %d", code)
	}
	var opts drover.Options
	if err := json.Unmarshal(g.Run.Options, &opts); err != nil || opts.Worktree == nil || opts.Worktree.Base != "main" || opts.Worktree.Check != "cat form.txt" {
		t.Fatalf("the run's options %s: %v", g.Run.Options, err)
	}
	close(gate)
	b.Wait(t, "its change, checked, waiting for review", `document.getElementById('change').dataset.state === 'pending' &&
		document.getElementById('change-check').textContent.includes('passed') &&
		document.querySelector('#change-check pre')?.textContent === 'from the form\n' &&
		document.querySelector('#change-files-body tr')?.dataset.path === 'form.txt'`)
	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}

// WS-2, SEC-6: in a real headless Chromium, a patch of megabytes is shown
// in pages (the page stays responsive; "show more" adds the next); a
// patch over the ledger's limit says so and keeps its files listed; what
// an agent wrote into a file and its name is shown exactly, never as
// markup. Screenshot: testartifacts/dashboard-change-large.png.
func TestWS2_DashboardShowsLargeAndHostileChanges(t *testing.T) {
	f := newChangeFixture(t, 6<<20)
	big := f.run(t, "lines big.txt 200000", `{}`)
	huge := f.run(t, "lines huge.txt 250000\nwrite small.txt: listed", `{}`)
	hostile := f.run(t, "write odd <b>name</b>.txt: \x1b]0;owned\x07title \u202eevil\x1b[8mhidden<img src=x onerror=document.body.dataset.pwned=1>\tend", `{}`)
	if c := f.change(t, big); c.Truncated || len(c.Patch) < 5<<20 {
		t.Fatalf("the big change: truncated %v, patch of %d bytes", c.Truncated, len(c.Patch))
	}

	b := browsertest.New(t)
	b.Do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.Wait(t, "the dashboard, live", `document.getElementById('conn').dataset.state === 'live'`)

	start := time.Now()
	openChange(t, b, big, "pending")
	b.Wait(t, "the first page of the diff", `document.querySelectorAll('#diff .dl').length > 0`)
	t.Logf("a 5 MB patch shown in %v", time.Since(start))
	rows := `document.querySelectorAll('#diff .dl').length`
	if n := browsertest.Eval[int](t, b, rows); n != 1500 {
		t.Fatalf("%d diff lines shown at first, want a page of 1500", n)
	}
	more := browsertest.Eval[string](t, b, `document.getElementById('diff-more').hidden ? '' : document.getElementById('diff-more').textContent`)
	if more != "Show more: 198,506 lines not shown yet" {
		t.Fatalf("show more: %q", more)
	}
	b.Do(t, "show more", chromedp.Click(chromedp.ID("diff-more"), chromedp.NodeVisible))
	b.Wait(t, "the next page", rows+` === 3000`)
	top(t, b)
	b.Screenshot(t, "dashboard-change-large.png")
	if got := browsertest.Eval[string](t, b, `document.querySelector('#change-files-body tr').textContent`); got != "big.txtadded+200,000 −0" {
		t.Fatalf("files: %q", got)
	}

	openChange(t, b, huge, "pending")
	got := browsertest.Eval[map[string]any](t, b, `({
		note: document.getElementById('change-truncated').hidden ? '' : document.getElementById('change-truncated').textContent,
		files: [...document.querySelectorAll('#change-files-body tr')].map(r => r.dataset.path),
		lines: document.querySelectorAll('#diff .dl').length,
		diff: document.getElementById('diff').hidden })`)
	if n := got["note"].(string); !strings.Contains(n, "larger than the ledger keeps") || !strings.Contains(n, "drover/"+huge) ||
		!slices.Equal(anyStrings(got["files"]), []string{"huge.txt", "small.txt"}) || got["lines"].(float64) != 0 || got["diff"] != true {
		t.Fatalf("the truncated change: %v", got)
	}

	openChange(t, b, hostile, "pending")
	got = browsertest.Eval[map[string]any](t, b, `({
		file: document.querySelector('#change-files-body td.path').textContent,
		header: document.querySelector('#diff .dl-file .tx').textContent,
		added: document.querySelector('#diff .dl-add .tx').textContent,
		markup: document.querySelectorAll('#change b, #change img').length,
		pwned: document.body.dataset.pwned || '' })`)
	want := map[string]any{
		"file":   "odd <b>name</b>.txt",
		"header": "diff --git a/odd <b>name</b>.txt b/odd <b>name</b>.txt",
		"added":  `+\e]0;owned\x07title \u202eevil\e[8mhidden<img src=x onerror=document.body.dataset.pwned=1>` + "\tend",
		"markup": 0.0,
		"pwned":  "",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}
