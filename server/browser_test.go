package server_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/drover-run/drover/internal/testkit/browsertest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// rowSel selects a run's row in the run list.
func rowSel(id string) string {
	return fmt.Sprintf(`#runs-body tr[data-run-id=%s]`, browsertest.JS(id))
}

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
		var res runs.Started
		if code := f.do(t, "POST", "/v1/runs", body, &res, bearer...); code != http.StatusCreated {
			t.Fatalf("POST /v1/runs %s: %d", body, code)
		}
		return res.RunID
	}
	b := browsertest.New(t)

	// Signing in: no token shows the form; a wrong one in the address is
	// refused; the right one typed in opens the dashboard.
	b.Do(t, "open the dashboard", chromedp.Navigate(f.ts.URL+"/"))
	b.Wait(t, "the sign-in form", `!document.getElementById('login').hidden && document.getElementById('app').hidden`)
	b.Do(t, "open with a wrong token", chromedp.Navigate(f.ts.URL+"/#token=wrong"))
	b.Wait(t, "the refusal", `document.getElementById('login-error').textContent.includes('refused')`)
	if h := browsertest.Eval[string](t, b, `location.hash`); h != "" {
		t.Fatalf("the token stayed in the address: %q", h)
	}
	b.Do(t, "sign in",
		chromedp.SendKeys(chromedp.ID("token"), token, chromedp.NodeVisible),
		chromedp.Click(chromedp.CSS("#login-form button")))
	b.Wait(t, "the dashboard, live", `!document.getElementById('app').hidden && document.getElementById('conn').dataset.state === 'live'`)

	// A run started through the API appears; its events stream into the
	// timeline while it runs.
	gate := make(chan struct{})
	f.gates.ch <- gate
	live := start(`{"agent":"gated","prompt":"3"}`)
	b.Wait(t, "the new run's row", `document.querySelector(`+browsertest.JS(rowSel(live))+`) !== null`)
	b.Do(t, "select the run", chromedp.Click(chromedp.CSS(rowSel(live)), chromedp.NodeVisible))
	b.Wait(t, "the first three events", `document.querySelectorAll('#timeline .ev[data-type=text]').length === 3`)
	if st := browsertest.Eval[string](t, b, `document.querySelector(`+browsertest.JS(rowSel(live))+`).dataset.status`); store.RunStatus(st).Terminal() {
		t.Fatalf("run row says %q while the run waits at its gate", st)
	}
	b.Screenshot(t, "dashboard-live.png")
	close(gate) // the run goes on: three more texts, then done
	b.Wait(t, "the rest of the events, done last",
		`(() => { const evs = [...document.querySelectorAll('#timeline .ev')];
		  return evs.length === 7 && evs[6].dataset.type === 'done' &&
		    evs.every((e, i) => e.dataset.seq === String(i + 1)); })()`)
	b.Wait(t, "the row to say completed", `document.querySelector(`+browsertest.JS(rowSel(live))+`).dataset.status === 'completed'`)
	texts := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#timeline .ev[data-type=text] pre')].map(e => e.textContent)`)
	if want := []string{"#0", "#1", "#2", "#3", "#4", "#5"}; strings.Join(texts, ",") != strings.Join(want, ",") {
		t.Fatalf("timeline texts %q, want %q", texts, want)
	}

	// The run tree: a child is nested under its parent.
	parent := start(`{"agent":"hang","prompt":"parent"}`)
	child := start(fmt.Sprintf(`{"agent":"hang","prompt":"child","parent":%q}`, parent))
	b.Wait(t, "the child under its parent",
		`(() => { const p = document.querySelector(`+browsertest.JS(rowSel(parent))+`), c = document.querySelector(`+browsertest.JS(rowSel(child))+`);
		  return p && c && p.nextElementSibling === c && c.dataset.depth === '1' && c.dataset.parentId === `+browsertest.JS(parent)+`; })()`)

	// Cancel from the dashboard: the parent, whose child ends with it.
	b.Do(t, "select the parent", chromedp.Click(chromedp.CSS(rowSel(parent)), chromedp.NodeVisible))
	b.Wait(t, "the parent's first event", `document.querySelectorAll('#timeline .ev[data-type=text]').length === 1 && document.getElementById('detail').dataset.runId === `+browsertest.JS(parent))
	b.Do(t, "press cancel", chromedp.Click(chromedp.ID("cancel"), chromedp.NodeVisible))
	b.Wait(t, "the parent cancelled, its done shown",
		`document.querySelector(`+browsertest.JS(rowSel(parent))+`).dataset.status === 'failed' &&
		 document.getElementById('detail-status').textContent === 'cancelled' &&
		 document.getElementById('cancel').hidden &&
		 document.querySelector('#timeline .ev[data-type=done]') !== null`)
	b.Wait(t, "the child ended too", `document.querySelector(`+browsertest.JS(rowSel(child))+`).dataset.status === 'failed'`)
	rs := f.await(t, parent, child)
	if rs[0].DoneStatus != "interrupted" || rs[1].Error != store.ReasonParentEnded {
		t.Fatalf("ledger: parent %s/%s, child %s %q", rs[0].Status, rs[0].DoneStatus, rs[1].Status, rs[1].Error)
	}

	// Usage adds up; a prompt full of markup stays text.
	costly := start(`{"agent":"costly","prompt":"<img src=x onerror=\"document.body.dataset.pwned=1\"><b>bold</b>"}`)
	f.await(t, costly)
	b.Wait(t, "the usage totals",
		`document.getElementById('usage-in').textContent === '1,200' &&
		 document.getElementById('usage-out').textContent === '340' &&
		 document.getElementById('usage-cost').textContent === '$0.50'`)
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('#runs img, #runs b').length`); n != 0 {
		t.Fatalf("a prompt's markup became %d elements", n)
	}
	if got := browsertest.Eval[string](t, b, `document.querySelector(`+browsertest.JS(rowSel(costly))+` + ' td.prompt').textContent`); !strings.Contains(got, `<img src=x`) {
		t.Fatalf("prompt cell %q, want the markup as text", got)
	}
	if browsertest.Eval[bool](t, b, `document.body.dataset.pwned === '1'`) {
		t.Fatal("markup in a prompt ran")
	}

	// A tool call shows its input and result; an error its code.
	tooly := start(`{"agent":"tooly","prompt":"look around"}`)
	f.await(t, tooly)
	b.Do(t, "select the tool run", chromedp.Click(chromedp.CSS(rowSel(tooly)), chromedp.NodeVisible))
	b.Wait(t, "the tool run's timeline", `document.querySelectorAll('#timeline .ev').length === 4 && document.getElementById('detail').dataset.runId === `+browsertest.JS(tooly))
	tl := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#timeline .ev')].map(e => e.dataset.type + ': ' + e.querySelector('.body').textContent)`)
	for i, want := range []string{`tool_use: Bash list files{  "command": "ls -la"}`, "tool_result: success Bashhello.txt\nmain.go", "error: API_ERROR overloaded, retrying (recoverable)", "done: success"} {
		if got := strings.ReplaceAll(tl[i], "\n", ""); !strings.HasPrefix(got, strings.ReplaceAll(want, "\n", "")) {
			t.Fatalf("timeline item %d: %q, want %q", i, tl[i], want)
		}
	}
	b.Screenshot(t, "dashboard-tools.png")

	// Filters: by text, and by status with the tree kept whole.
	b.Do(t, "filter by text", chromedp.SendKeys(chromedp.ID("filter-text"), "costly"))
	b.Wait(t, "only the costly run", `(() => { const rows = [...document.querySelectorAll('#runs-body tr.run')];
		return rows.length === 1 && rows[0].dataset.runId === `+browsertest.JS(costly)+`; })()`)
	// What a person's choice in a select does: set it, fire "change".
	filter := func(text, status string) {
		browsertest.Eval[bool](t, b, `(() => {
			const q = document.getElementById('filter-text'), s = document.getElementById('filter-status');
			q.value = `+browsertest.JS(text)+`; q.dispatchEvent(new Event('input'));
			s.value = `+browsertest.JS(status)+`; return s.dispatchEvent(new Event('change')); })()`)
	}
	filter("", "failed")
	b.Wait(t, "the cancelled parent and its child only", `(() => { const ids = [...document.querySelectorAll('#runs-body tr.run')].map(r => r.dataset.runId);
		return ids.join() === [`+browsertest.JS(parent)+`, `+browsertest.JS(child)+`].join(); })()`)
	filter("", "")
	b.Wait(t, "every run again", `document.querySelectorAll('#runs-body tr.run').length === 5`)

	// Starting a run from the dashboard's form.
	b.Do(t, "start a run from the form",
		chromedp.SendKeys(chromedp.ID("new-agent"), "quick"),
		chromedp.SendKeys(chromedp.ID("new-prompt"), "4"),
		chromedp.Click(chromedp.CSS("#new-run button")))
	b.Wait(t, "the form's run selected and done",
		`(() => { const id = document.getElementById('detail').dataset.runId;
		  const r = id && document.querySelector('#runs-body tr[data-run-id="' + id + '"]');
		  return r && r.querySelector('.agent').textContent === 'quick' && r.dataset.status === 'completed' &&
		    document.querySelectorAll('#timeline .ev[data-type=text]').length === 4; })()`)
	b.Screenshot(t, "dashboard.png")

	// A link to a run that does not exist says so.
	browsertest.Eval[bool](t, b, `(location.hash = '#run=run_nope', true)`)
	b.Wait(t, "the unknown run reported", `document.getElementById('detail').dataset.runId === 'run_nope' &&
		document.getElementById('detail-error').textContent.includes('NOT_FOUND')`)

	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
}
