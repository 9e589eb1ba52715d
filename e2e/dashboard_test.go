package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/drover-run/drover/internal/testkit/browsertest"
)

// TestPRO4_DashboardRealClaude is the dashboard end to end: a `drover serve
// --fakemodel` child process, the real claude CLI, and a person in headless
// Chromium who starts a run from the dashboard's form and watches Claude
// write hello.txt and run ls in the run's timeline, tool inputs and results
// included.
func TestPRO4_DashboardRealClaude(t *testing.T) {
	bin := claudeBin(t)
	droverBin := buildDrover(t)
	b := browsertest.New(t)
	home, ws := t.TempDir(), t.TempDir()
	// The address with the token of this start (drover serve makes one).
	url, stop := startServe(t, droverBin, append(os.Environ(), "DROVER_CLAUDE_BIN="+bin, "DROVER_TOKEN=", "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state")),
		regexp.MustCompile(`dashboard at (http://127\.0\.0\.1:\d+/#token=[0-9a-f]+)`), "--db", filepath.Join(home, "drover.db"))

	b.Do(t, "open the dashboard", chromedp.Navigate(url))
	b.Wait(t, "the dashboard, live", `!document.getElementById('app').hidden && document.getElementById('conn').dataset.state === 'live'`)
	b.Do(t, "start claude from the form",
		chromedp.SendKeys(chromedp.ID("new-agent"), "claude"),
		chromedp.SendKeys(chromedp.ID("new-cwd"), ws),
		chromedp.SendKeys(chromedp.ID("new-prompt"), "write hello.txt, then run ls"),
		chromedp.Click(chromedp.CSS("#new-run button")))
	b.Wait(t, "the run selected, running or done", `(() => {
		const id = document.getElementById('detail').dataset.runId;
		const r = id && document.querySelector('#runs-body tr[data-run-id="' + id + '"]');
		return r && r.querySelector('.agent').textContent === 'claude-code'; })()`)
	b.Wait(t, "claude's run to complete in the timeline", `(() => {
		const evs = [...document.querySelectorAll('#timeline .ev')];
		return evs.length > 0 && evs[evs.length - 1].dataset.type === 'done' &&
		  document.getElementById('detail-status').textContent === 'completed'; })()`)
	b.Screenshot(t, "dashboard-claude.png")

	tl := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#timeline .ev')].map(e => e.dataset.type + ': ' + e.querySelector('.body').textContent)`)
	var tools, results []string
	for _, l := range tl {
		switch {
		case strings.HasPrefix(l, "tool_use: "):
			tools = append(tools, l)
		case strings.HasPrefix(l, "tool_result: "):
			results = append(results, l)
		}
	}
	if len(tools) != 2 || !strings.HasPrefix(tools[0], "tool_use: Write") || !strings.Contains(tools[0], "hello.txt") ||
		!strings.HasPrefix(tools[1], "tool_use: Bash") || !strings.Contains(tools[1], `"command": "ls`) {
		t.Fatalf("tool calls in the timeline: %q\nwhole timeline: %q", tools, tl)
	}
	if len(results) != 2 || !strings.HasPrefix(results[0], "tool_result: success") || !strings.Contains(results[1], "hello.txt") {
		t.Fatalf("tool results in the timeline: %q", results)
	}
	if tl[0] == "" || !strings.HasPrefix(tl[0], "init: ") {
		t.Fatalf("the timeline starts with %q, want init", tl[0])
	}
	if data, err := os.ReadFile(filepath.Join(ws, "hello.txt")); err != nil || string(data) != "hello from drover\n" {
		t.Fatalf("hello.txt: %q %v", data, err)
	}
	if errs := b.PageErrors(); len(errs) > 0 {
		t.Fatalf("the page logged errors: %q", errs)
	}
	stop()
	noClaudeIn(t, ws)
}
