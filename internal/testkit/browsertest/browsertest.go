// Package browsertest drives the dashboard in a real headless Chromium
// (Debian's chromium, through chromedp) for tests: start, wait for a page
// condition, evaluate, screenshot. Tests only; it is never linked into
// drover.
package browsertest

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	cdpruntime "github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// Chromium finds the browser for dashboard tests: $DROVER_CHROMIUM, else
// Debian's chromium on PATH. Under DROVER_E2E=1 (CI) a missing browser is
// a failure; otherwise the test is skipped.
func Chromium(t testing.TB) string {
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

// ArtifactDir is where tests leave files for people to look at:
// $DROVER_ARTIFACTS, else testartifacts/ at the repository root.
func ArtifactDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("DROVER_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(repoRoot(), "testartifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Browser is one headless Chromium tab, with the page's uncaught
// exceptions and console errors collected.
type Browser struct {
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

// New starts Chromium with one tab; the test's cleanup closes it and
// waits for it to exit.
func New(t testing.TB) *Browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(Chromium(t)),
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
	b := &Browser{ctx: ctx}
	// Chromium is closed and waited for before the test's leak check.
	t.Cleanup(func() {
		_ = chromedp.Cancel(ctx)
		cancelTab()
		cancelAlloc()
	})
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch e := ev.(type) {
		case *cdpruntime.EventExceptionThrown:
			msg = "exception: " + e.ExceptionDetails.Text
			if e.ExceptionDetails.Exception != nil {
				msg += " " + e.ExceptionDetails.Exception.Description
			}
		case *cdpruntime.EventConsoleAPICalled:
			if e.Type != cdpruntime.ConsoleAPICalledTypeError {
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

// PageErrors are the page's uncaught exceptions and console errors so far.
func (b *Browser) PageErrors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errs...)
}

// Do runs steps, failing the test with what on an error.
func (b *Browser) Do(t testing.TB, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v\npage errors: %q", what, err, b.PageErrors())
	}
}

// Wait polls a JavaScript expression until it is truthy, for up to 20 s;
// on a timeout it saves failure.png and fails with the page's text.
func (b *Browser) Wait(t testing.TB, what, expr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[any](expr, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		b.Screenshot(t, "failure.png")
		body, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText.slice(0, 3000)`))
		t.Fatalf("waiting for %s (%s): %v\npage errors: %q\npage text:\n%s", what, expr, err, b.PageErrors(), body)
	}
}

// Eval evaluates a JavaScript expression.
func Eval[T any](t testing.TB, b *Browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// Screenshot saves the page as name (a PNG) in ArtifactDir.
func (b *Browser) Screenshot(t testing.TB, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	p := filepath.Join(ArtifactDir(t), name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", p)
}

// JS quotes s as a JavaScript string literal.
func JS(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// repoRoot is the repository's root, found from this file's path.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}
