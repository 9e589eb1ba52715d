package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// chromium finds the browser for dashboard tests: $DROVER_CHROMIUM, else
// Debian's chromium on PATH. Under DROVER_E2E=1 (CI) a missing browser is
// a failure; otherwise the test is skipped.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("DROVER_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("DROVER_E2E") == "1" {
		t.Fatal("no chromium on PATH (scripts/test installs Debian's chromium); set DROVER_CHROMIUM to use another")
	}
	t.Skip("no chromium on PATH; scripts/test installs it (or set DROVER_CHROMIUM)")
	return ""
}

// artifactDir is where tests leave files for people to look at:
// $DROVER_ARTIFACTS, else testartifacts/ at the repository root.
func artifactDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("DROVER_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join("..", "testartifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// browser is one headless Chromium tab, with the page's uncaught
// exceptions and console errors collected.
type browser struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium(t)),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox cannot start
		chromedp.DisableGPU,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 900),
		// The machine has no network: keep Chromium from trying to reach one.
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("no-pings", true),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	b := &browser{ctx: ctx}
	// Chromium is closed and waited for before the test's leak check.
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancelTab()
		cancelAlloc()
	})
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *runtime.EventConsoleAPICalled:
			if e.Type != runtime.ConsoleAPICalledTypeError {
				return
			}
			var parts []string
			for _, a := range e.Args {
				parts = append(parts, string(a.Value))
			}
			msg = "console.error: " + strings.Join(parts, " ")
		default:
			return
		}
		b.mu.Lock()
		b.errs = append(b.errs, msg)
		b.mu.Unlock()
	})
	if err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return b
}

// pageErrors are the page's uncaught exceptions and console errors so far.
func (b *browser) pageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\npage errors: %q", what, err, b.pageErrors())
	}
}

// wait polls a JavaScript expression until it is truthy.
func (b *browser) wait(t *testing.T, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[any](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.screenshot(t, "failure.png")
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		t.Fatalf("waiting for %s (%s): %v\npage errors: %q\npage text:\n%s", what, expr, err, b.pageErrors(), body)
	}
}

func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(artifactDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// js quotes s as a JavaScript string literal.
func js(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// rowSel selects a run's row in the run list.
func rowSel(id string) string { return fmt.Sprintf(`#runs-body tr[data-run-id=%s]`, js(id)) }

// PRO-4: the dashboard in a real headless Chromium. A person signs in with
// the token; runs started through the API appear live, with their tree and
// usage; a selected run's events appear in its timeline as they stream;
// the cancel button cancels; text from agents is never markup. Screenshots
// are left in testartifacts/.
func TestPRO4_DashboardInBrowser(t *testing.T) {
	const token = "dashboard-test-token"
	f := newFixture(t, server.Config{Token: token, Poll: 100 * time.Millisecond})
	bearer := []string{"Authorization", "Bearer " + token}
	start := func(body string) string {
		t.Helper()
		var res protocol.RunResult
		if code := f.do(t, "POST", "/v1/runs", body, &res, bearer...); code != http.StatusCreated {
			t.Fatalf("POST /v1/runs %s: %d", body, code)
		}
		return res.RunID
	}
	b := newBrowser(t)

	// Signing in: no token shows the form; a wrong one in the address is
	// refused; the right one typed in opens the dashboard.
	b.do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.wait(t, "the sign-in form", `!document.getElementById('login').hidden && document.getElementById('app').hidden`)
	b.do(t, "open with a wrong token", chromedp.Navigate(f.ts.URL+"/#token=wrong"))
	b.wait(t, "the refusal", `document.getElementById('login-error').textContent.includes('refused')`)
	if h := eval[string](t, b, `location.hash`); h != "" {
		t.Fatalf("the token stayed in the address: %q", h)
	}
	b.do(t, "sign in",
		chromedp.SendKeys(chromedp.ID("token"), token, chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS("#login-form button")))
	b.wait(t, "the dashboard, live", `!document.getElementById('app').hidden && document.getElementById('conn').dataset.state === 'live'`)

	// A run started through the API appears; its events stream into the
	// timeline while it runs.
	gate := make(chan struct{})
	f.gates.ch <- gate
	live := start(`{"agent":"gated","prompt":"3"}`)
	b.wait(t, "the new run's row", `document.querySelector(`+js(rowSel(live))+`) !== null`)
	b.do(t, "select the run", chromedp.Click(chromedp.CSS(rowSel(live)), chromedp.NodeVisible))
	b.wait(t, "the first three events", `document.querySelectorAll('#timeline .ev[data-type=text]').length === 3`)
	if st := eval[string](t, b, `document.querySelector(`+js(rowSel(live))+`).dataset.status`); store.RunStatus(st).Terminal() {
		t.Fatalf("run row says %q while the run waits at its gate", st)
	}
	b.screenshot(t, "dashboard-live.png")
	close(gate) // the run goes on: three more texts, then done
	b.wait(t, "the rest of the events, done last",
		`(() => { const evs = [...document.querySelectorAll('#timeline .ev')];
		  return evs.length === 7 && evs[6].dataset.type === 'done' &&
		    evs.every((e, i) => e.dataset.seq === String(i + 1)); })()`)
	b.wait(t, "the row to say completed", `document.querySelector(`+js(rowSel(live))+`).dataset.status === 'completed'`)
	texts := eval[[]string](t, b, `[...document.querySelectorAll('#timeline .ev[data-type=text] pre')].map(e => e.textContent)`)
	if want := []string{"#0", "#1", "#2", "#3", "#4", "#5"}; strings.Join(texts, ",") != strings.Join(want, ",") {
		t.Fatalf("timeline texts %q, want %q", texts, want)
	}

	// The run tree: a child is nested under its parent.
	parent := start(`{"agent":"hang","prompt":"parent"}`)
	child := start(fmt.Sprintf(`{"agent":"hang","prompt":"child","parent":%q}`, parent))
	b.wait(t, "the child under its parent",
		`(() => { const p = document.querySelector(`+js(rowSel(parent))+`), c = document.querySelector(`+js(rowSel(child))+`);
		  return p && c && p.nextElementSibling === c && c.dataset.depth === '1' && c.dataset.parentId === `+js(parent)+`; })()`)

	// Cancel from the dashboard: the parent, whose child ends with it.
	b.do(t, "select the parent", chromedp.Click(chromedp.CSS(rowSel(parent)), chromedp.NodeVisible))
	b.wait(t, "the parent's first event", `document.querySelectorAll('#timeline .ev[data-type=text]').length === 1 && document.getElementById('detail').dataset.runId === `+js(parent))
	b.do(t, "press cancel", chromedp.Click(chromedp.ID("cancel"), chromedp.NodeVisible))
	b.wait(t, "the parent cancelled, its done shown",
		`document.querySelector(`+js(rowSel(parent))+`).dataset.status === 'failed' &&
		 document.getElementById('detail-status').textContent === 'cancelled' &&
		 document.getElementById('cancel').hidden &&
		 document.querySelector('#timeline .ev[data-type=done]') !== null`)
	b.wait(t, "the child ended too", `document.querySelector(`+js(rowSel(child))+`).dataset.status === 'failed'`)
	rs := f.await(t, parent, child)
	if rs[0].DoneStatus != "interrupted" || rs[1].Error != store.ReasonParentEnded {
		t.Fatalf("ledger: parent %s/%s, child %s %q", rs[0].Status, rs[0].DoneStatus, rs[1].Status, rs[1].Error)
	}

	// Usage adds up; a prompt full of markup stays text.
	costly := start(`{"agent":"costly","prompt":"<img src=x onerror=\"document.body.dataset.pwned=1\"><b>bold</b>"}`)
	f.await(t, costly)
	b.wait(t, "the usage totals",
		`document.getElementById('usage-in').textContent === '1,200' &&
		 document.getElementById('usage-out').textContent === '340' &&
		 document.getElementById('usage-cost').textContent === '$0.50'`)
	if n := eval[int](t, b, `document.querySelectorAll('#runs img, #runs b').length`); n != 0 {
		t.Fatalf("a prompt's markup became %d elements", n)
	}
	if got := eval[string](t, b, `document.querySelector(`+js(rowSel(costly))+` + ' td.prompt').textContent`); !strings.Contains(got, `<img src=x`) {
		t.Fatalf("prompt cell %q, want the markup as text", got)
	}
	if eval[bool](t, b, `document.body.dataset.pwned === '1'`) {
		t.Fatal("markup in a prompt ran")
	}

	// A tool call shows its input and result; an error its code.
	tooly := start(`{"agent":"tooly","prompt":"look around"}`)
	f.await(t, tooly)
	b.do(t, "select the tool run", chromedp.Click(chromedp.CSS(rowSel(tooly)), chromedp.NodeVisible))
	b.wait(t, "the tool run's timeline", `document.querySelectorAll('#timeline .ev').length === 4 && document.getElementById('detail').dataset.runId === `+js(tooly))
	tl := eval[[]string](t, b, `[...document.querySelectorAll('#timeline .ev')].map(e => e.dataset.type + ': ' + e.querySelector('.body').textContent)`)
	for i, want := range []string{`tool_use: Bash list files{  "command": "ls -la"}`, "tool_result: success Bashhello.txt\nmain.go", "error: API_ERROR overloaded, retrying (recoverable)", "done: success"} {
		if got := strings.ReplaceAll(tl[i], "\n", ""); !strings.HasPrefix(got, strings.ReplaceAll(want, "\n", "")) {
			t.Fatalf("timeline item %d: %q, want %q", i, tl[i], want)
		}
	}
	b.screenshot(t, "dashboard-tools.png")

	// Starting a run from the dashboard's form.
	b.do(t, "start a run from the form",
		chromedp.SendKeys(chromedp.ID("new-agent"), "quick"),
		chromedp.SendKeys(chromedp.ID("new-prompt"), "4"),
		chromedp.Click(chromedp.CSS("#new-run button")))
	b.wait(t, "the form's run selected and done",
		`(() => { const id = document.getElementById('detail').dataset.runId;
		  const r = id && document.querySelector('#runs-body tr[data-run-id="' + id + '"]');
		  return r && r.querySelector('.agent').textContent === 'quick' && r.dataset.status === 'completed' &&
		    document.querySelectorAll('#timeline .ev[data-type=text]').length === 4; })()`)
	b.screenshot(t, "dashboard.png")

	if errs := b.pageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}
