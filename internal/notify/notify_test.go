package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// failsafe bounds every wait on a channel: reaching it fails the test, it
// never orders events.
const failsafe = 10 * time.Second

var t0 = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// hit is one request a receiver got.
type hit struct {
	body   string
	header http.Header
	at     time.Time
}

// receiver starts a webhook on 127.0.0.1 that records every request on
// the returned channel, then answers with respond (given the request's
// 1-based number).
func receiver(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, n int)) (string, chan hit) {
	t.Helper()
	hits := make(chan hit, 2000)
	var count atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		hits <- hit{string(b), r.Header.Clone(), time.Now()}
		respond(w, r, int(count.Add(1)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL, hits
}

func ok(w http.ResponseWriter, _ *http.Request, _ int) {}

func newNotifier(t *testing.T, cfg Config) *Notifier {
	t.Helper()
	if cfg.Backoff == 0 {
		cfg.Backoff = time.Millisecond
	}
	n, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close(context.Background()) })
	return n
}

func closeNotifier(t *testing.T, n *Notifier) {
	t.Helper()
	if err := n.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// drain returns what hits holds once every delivery is over.
func drain(hits chan hit) []hit {
	var got []hit
	for {
		select {
		case h := <-hits:
			got = append(got, h)
		default:
			return got
		}
	}
}

func wait(t *testing.T, hits chan hit) hit {
	t.Helper()
	select {
	case h := <-hits:
		return h
	case <-time.After(failsafe):
		t.Fatal("no request reached the receiver")
		return hit{}
	}
}

func wantStats(t *testing.T, n *Notifier, want ...TargetStats) {
	t.Helper()
	got := n.Stats().Targets
	for i := range got {
		got[i].Target = ""
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stats = %+v, want %+v", got, want)
	}
}

// TestCON3_DeliversEachKindAsJSON: each kind of notice arrives as the
// exact JSON body, with its content type and user agent.
func TestCON3_DeliversEachKindAsJSON(t *testing.T) {
	url, hits := receiver(t, ok)
	n := newNotifier(t, Config{Targets: []string{url}})
	cost := 1.25
	n.Send(Notice{Kind: KindPermission, Text: "claude wants Bash: go test ./...", RunID: "run-1", Agent: "claude",
		Tool: "Bash", Summary: "go test ./...", RequestID: "req-9", Deadline: t0.Add(5 * time.Minute), Time: t0, Host: "ci-1"})
	n.Send(Notice{Kind: KindRunEnded, Text: "run-1 (claude) completed: 3 tool calls, 2 denied", RunID: "run-1", Agent: "claude",
		Outcome: "completed", Summary: "3 tool calls, 2 denied", CostUSD: &cost, Time: t0, Host: "ci-1"})
	n.Send(Notice{Kind: KindBudget, Text: "run-1 crossed its budget: $1.25", RunID: "run-1", Agent: "claude", CostUSD: &cost, Time: t0})
	cost = 99 // Send took a copy
	closeNotifier(t, n)

	want := []string{
		`{"kind":"permission_request","text":"claude wants Bash: go test ./...","runId":"run-1","agent":"claude","tool":"Bash","summary":"go test ./...","requestId":"req-9","deadline":"2026-03-04T05:11:07Z","time":"2026-03-04T05:06:07Z","host":"ci-1","content":"claude wants Bash: go test ./..."}`,
		`{"kind":"run_ended","text":"run-1 (claude) completed: 3 tool calls, 2 denied","runId":"run-1","agent":"claude","outcome":"completed","summary":"3 tool calls, 2 denied","costUsd":1.25,"time":"2026-03-04T05:06:07Z","host":"ci-1","content":"run-1 (claude) completed: 3 tool calls, 2 denied"}`,
		`{"kind":"budget_crossed","text":"run-1 crossed its budget: $1.25","runId":"run-1","agent":"claude","costUsd":1.25,"time":"2026-03-04T05:06:07Z","content":"run-1 crossed its budget: $1.25"}`,
	}
	got := drain(hits)
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d", len(got), len(want))
	}
	for i, h := range got {
		if h.body != want[i] {
			t.Errorf("body %d:\n got %s\nwant %s", i, h.body, want[i])
		}
		if ct, ua := h.header.Get("Content-Type"), h.header.Get("User-Agent"); ct != "application/json" || ua != "drover/notify" {
			t.Errorf("Content-Type %q, User-Agent %q", ct, ua)
		}
	}
	wantStats(t, n, TargetStats{Delivered: 3})
}

// TestCON3_FillsTimeAndText: a notice without a time or text gets both.
func TestCON3_FillsTimeAndText(t *testing.T) {
	url, hits := receiver(t, ok)
	n := newNotifier(t, Config{Targets: []string{url}})
	before := time.Now()
	n.Send(Notice{Kind: KindRunEnded, RunID: "run-7"})
	closeNotifier(t, n)
	var got Notice
	if err := json.Unmarshal([]byte(wait(t, hits).body), &got); err != nil {
		t.Fatal(err)
	}
	if got.Text != "drover: run ended run-7" || got.Time.Before(before.Truncate(time.Second)) {
		t.Errorf("text %q, time %v", got.Text, got.Time)
	}
}

// TestCON3_RetriesServerErrorThenDelivers: a 500 and a 503 are retried
// with the same body until a 2xx.
func TestCON3_RetriesServerErrorThenDelivers(t *testing.T) {
	url, hits := receiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n <= 2 {
			w.WriteHeader(499 + n)
		}
	})
	n := newNotifier(t, Config{Targets: []string{url}})
	n.Send(Notice{Kind: KindRunEnded, Text: "done", Time: t0})
	closeNotifier(t, n)
	got := drain(hits)
	if len(got) != 3 || got[0].body != got[2].body {
		t.Fatalf("got %d requests, want 3 with the same body", len(got))
	}
	wantStats(t, n, TargetStats{Delivered: 1})
}

// TestCON3_GivesUpAfterMaxAttempts: a receiver that keeps failing gets
// MaxAttempts requests, then the notice counts as failed.
func TestCON3_GivesUpAfterMaxAttempts(t *testing.T) {
	url, hits := receiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadGateway) })
	n := newNotifier(t, Config{Targets: []string{url}, MaxAttempts: 3})
	n.Send(Notice{Kind: KindRunEnded, Text: "done"})
	closeNotifier(t, n)
	if got := len(drain(hits)); got != 3 {
		t.Errorf("got %d requests, want 3", got)
	}
	wantStats(t, n, TargetStats{Failed: 1})
}

// TestCON3_HonoursRetryAfter: a 429's Retry-After sets the wait before
// the retry (capped), instead of the backoff.
func TestCON3_HonoursRetryAfter(t *testing.T) {
	url, hits := receiver(t, func(w http.ResponseWriter, _ *http.Request, n int) {
		if n == 1 {
			w.Header().Set("Retry-After", "3600")
			w.WriteHeader(http.StatusTooManyRequests)
		}
	})
	const capped = 50 * time.Millisecond
	n := newNotifier(t, Config{Targets: []string{url}, Backoff: time.Microsecond, maxDelay: capped})
	n.Send(Notice{Kind: KindBudget, Text: "over"})
	closeNotifier(t, n)
	got := drain(hits)
	if len(got) != 2 {
		t.Fatalf("got %d requests, want 2", len(got))
	}
	if gap := got[1].at.Sub(got[0].at); gap < capped {
		t.Errorf("retried after %v, want at least the capped Retry-After %v", gap, capped)
	}
	wantStats(t, n, TargetStats{Delivered: 1})

	for v, want := range map[string]time.Duration{"7": 7 * time.Second, " 2 ": 2 * time.Second, "": 0, "soon": 0, "-3": 0,
		"99999999999": 24 * time.Hour, "99999999999999999999": 0, time.Now().Add(-time.Hour).UTC().Format(http.TimeFormat): 0} {
		if got := retryAfter(v); got != want {
			t.Errorf("retryAfter(%q) = %v, want %v", v, got, want)
		}
	}
	if got := retryAfter(time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)); got < 58*time.Minute || got > time.Hour {
		t.Errorf("retryAfter(an hour from now) = %v", got)
	}
}

// TestCON3_ClientErrorNotRetried: a 400 is given up at once.
func TestCON3_ClientErrorNotRetried(t *testing.T) {
	url, hits := receiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusBadRequest) })
	n := newNotifier(t, Config{Targets: []string{url}})
	n.Send(Notice{Kind: KindRunEnded, Text: "done"})
	closeNotifier(t, n)
	if got := len(drain(hits)); got != 1 {
		t.Errorf("got %d requests, want 1", got)
	}
	wantStats(t, n, TargetStats{Failed: 1})
}

// TestCON3_RedirectNotFollowed: a webhook that redirects elsewhere is
// given up on; the other host never hears of the notice.
func TestCON3_RedirectNotFollowed(t *testing.T) {
	other, otherHits := receiver(t, ok)
	url, hits := receiver(t, func(w http.ResponseWriter, r *http.Request, _ int) {
		http.Redirect(w, r, other+"/steal", http.StatusTemporaryRedirect)
	})
	n := newNotifier(t, Config{Targets: []string{url}, Client: &http.Client{}})
	n.Send(Notice{Kind: KindRunEnded, Text: "done"})
	closeNotifier(t, n)
	if a, b := len(drain(hits)), len(drain(otherHits)); a != 1 || b != 0 {
		t.Errorf("webhook got %d requests, the redirect's target %d; want 1 and 0", a, b)
	}
	wantStats(t, n, TargetStats{Failed: 1})
}

// hanging is a receiver that records each request, then holds it until
// release is closed (or the client goes away).
func hanging(t *testing.T) (url string, hits chan hit, release func()) {
	ch := make(chan struct{})
	url, hits = receiver(t, func(_ http.ResponseWriter, r *http.Request, _ int) {
		select {
		case <-ch:
		case <-r.Context().Done():
		}
	})
	return url, hits, sync1(func() { close(ch) })
}

func sync1(f func()) func() {
	var done atomic.Bool
	return func() {
		if done.CompareAndSwap(false, true) {
			f()
		}
	}
}

func runIDs(t *testing.T, hs []hit) []string {
	var ids []string
	for _, h := range hs {
		var nt Notice
		if err := json.Unmarshal([]byte(h.body), &nt); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, nt.RunID)
	}
	return ids
}

// TestCON3_SendNeverBlocks: while the receiver hangs, Send returns 1000
// times; the full queue drops its oldest notices and counts them.
func TestCON3_SendNeverBlocks(t *testing.T) {
	url, hits, release := hanging(t)
	t.Cleanup(release) // before the server's Close, which waits for handlers
	const size = 8
	n := newNotifier(t, Config{Targets: []string{url}, QueueSize: size})
	n.Send(Notice{Kind: KindRunEnded, RunID: "r0"})
	wait(t, hits) // r0 is in flight, held by the receiver

	sent := make(chan struct{})
	go func() {
		for i := 1; i <= 1000; i++ {
			n.Send(Notice{Kind: KindRunEnded, RunID: "r" + strconv.Itoa(i)})
		}
		close(sent)
	}()
	select {
	case <-sent:
	case <-time.After(failsafe):
		t.Fatal("Send blocked while the receiver hangs")
	}
	wantStats(t, n, TargetStats{Dropped: 1000 - size})

	release()
	closeNotifier(t, n)
	got := runIDs(t, drain(hits))
	want := []string{"r993", "r994", "r995", "r996", "r997", "r998", "r999", "r1000"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("delivered after r0: %v, want the newest %v", got, want)
	}
	wantStats(t, n, TargetStats{Delivered: 1 + size, Dropped: 1000 - size})
}

// TestCON3_CloseGivesUpWhenContextEnds: Close with work pending and an
// ended ctx aborts the request under way, counts the rest as failed,
// returns the ctx's error, and leaves no goroutine behind.
func TestCON3_CloseGivesUpWhenContextEnds(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // last, once the receiver is closed too
	url, hits, release := hanging(t)
	t.Cleanup(release)
	n := newNotifier(t, Config{Targets: []string{url}})
	for i := range 5 {
		n.Send(Notice{Kind: KindRunEnded, RunID: "r" + strconv.Itoa(i)})
	}
	wait(t, hits)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start := time.Now()
	if err := n.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close = %v, want context.Canceled", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close took %v", d)
	}
	select {
	case <-n.done:
	default:
		t.Error("Close returned before the target's goroutine")
	}
	wantStats(t, n, TargetStats{Failed: 5})

	n.Send(Notice{Kind: KindRunEnded, RunID: "late"})
	wantStats(t, n, TargetStats{Failed: 5, Dropped: 1})
	if err := n.Close(context.Background()); err != nil {
		t.Errorf("second Close = %v", err)
	}
}

// TestCON3_RedactsEveryStringField: Redact sees every string field, so a
// secret anywhere in a notice never reaches the receiver.
func TestCON3_RedactsEveryStringField(t *testing.T) {
	url, hits := receiver(t, ok)
	n := newNotifier(t, Config{Targets: []string{url}, Redact: func(s string) string {
		return strings.ReplaceAll(s, "sk-ant-SECRET", "[REDACTED]")
	}})
	var nt Notice
	v := reflect.ValueOf(&nt).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.String {
			f.SetString(v.Type().Field(i).Name + " sk-ant-SECRET")
		}
	}
	nt.Text = "key sk-ant-SECRET in the text"
	nt.Summary = `curl -H "x-api-key: sk-ant-SECRET"`
	n.Send(nt)
	closeNotifier(t, n)
	body := wait(t, hits).body
	if strings.Contains(body, "SECRET") || !strings.Contains(body, `"text":"key [REDACTED] in the text"`) ||
		!strings.Contains(body, `"content":"key [REDACTED] in the text"`) || !strings.Contains(body, `"host":"Host [REDACTED]"`) {
		t.Errorf("body %s", body)
	}
}

// TestCON3_LogsNoURLSecrets: the logs name a webhook by scheme://host,
// never its userinfo, path or query, whatever goes wrong.
func TestCON3_LogsNoURLSecrets(t *testing.T) {
	failing, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusInternalServerError) })
	refusing, _ := receiver(t, func(w http.ResponseWriter, _ *http.Request, _ int) { w.WriteHeader(http.StatusForbidden) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	_ = ln.Close()
	secret := func(u string) string {
		return strings.Replace(u, "http://", "http://user:hunter2@", 1) + "/hooks/PATHTOKEN?token=QUERYTOKEN"
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	n := newNotifier(t, Config{Targets: []string{secret(failing), secret(refusing), secret(dead)}, Log: log, MaxAttempts: 2})
	n.Send(Notice{Kind: KindRunEnded, Text: "done"})
	closeNotifier(t, n)

	out := buf.String()
	for _, s := range []string{"hunter2", "user", "PATHTOKEN", "QUERYTOKEN", "/hooks"} {
		if strings.Contains(out, s) {
			t.Errorf("log holds %q:\n%s", s, out)
		}
	}
	for _, u := range []string{failing, refusing, dead} {
		if !strings.Contains(out, "target="+u+" ") {
			t.Errorf("log does not name %s:\n%s", u, out)
		}
	}
	for i, st := range n.Stats().Targets {
		if want := []string{failing, refusing, dead}[i]; st.Target != want || st.Failed != 1 {
			t.Errorf("Stats %d = %+v, want target %s failed 1", i, st, want)
		}
	}
}

// fakeNotifier puts an executable script called name alone on PATH. Each
// run appends its arguments, each ended by NUL, then a record separator,
// to the returned file; then it exits with code.
func fakeNotifier(t *testing.T, name string, code int) (argsFile string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in notifier is a shell script")
	}
	dir := t.TempDir()
	argsFile = filepath.Join(dir, "args")
	script := "#!/bin/sh\nprintf '%s\\0' \"$@\" >>\"$NTF_ARGS\"\nprintf '\\036' >>\"$NTF_ARGS\"\nexit " + strconv.Itoa(code) + "\n"
	if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir)
	t.Setenv("NTF_ARGS", argsFile)
	return argsFile
}

// runs returns the argument lists of every run recorded in argsFile.
func runs(t *testing.T, argsFile string) [][]string {
	t.Helper()
	b, err := os.ReadFile(argsFile)
	if err != nil {
		t.Fatal(err)
	}
	var rs [][]string
	for rec := range strings.SplitSeq(strings.TrimSuffix(string(b), "\036"), "\036") {
		rs = append(rs, strings.Split(strings.TrimSuffix(rec, "\x00"), "\x00"))
	}
	return rs
}

// hostile is text a shell would act on; it must arrive as one argument.
func hostile(dir string) string {
	return "it's \"done\" $(touch " + dir + "/pwned) `touch " + dir + "/pwned` \\ back\\slash\nsecond line; exit 3"
}

// TestCON3_DesktopNotifySend: notify-send gets the app name, a title and
// the text verbatim as one argument, with no shell in between; a text
// starting with "-" is not taken for an option.
func TestCON3_DesktopNotifySend(t *testing.T) {
	argsFile := fakeNotifier(t, "notify-send", 0)
	dir := filepath.Dir(argsFile)
	n := newNotifier(t, Config{Targets: []string{"desktop"}})
	n.Send(Notice{Kind: KindRunEnded, Text: hostile(dir)})
	n.Send(Notice{Kind: KindPermission, Text: "--help"})
	closeNotifier(t, n)
	want := [][]string{
		{"--app-name=drover", "drover: run ended", hostile(dir)},
		{"--app-name=drover", "drover: permission requested", " --help"},
	}
	if got := runs(t, argsFile); !reflect.DeepEqual(got, want) {
		t.Errorf("notify-send runs:\n got %q\nwant %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("the text was run by a shell")
	}
	wantStats(t, n, TargetStats{Delivered: 2})
}

// TestCON3_DesktopOsascript: without notify-send, osascript runs a fixed
// script that reads the title and text from its arguments, so they need
// no AppleScript quoting and cannot break out of a string literal.
func TestCON3_DesktopOsascript(t *testing.T) {
	argsFile := fakeNotifier(t, "osascript", 0)
	text := hostile(filepath.Dir(argsFile)) + ` " & (do shell script "id") & "`
	n := newNotifier(t, Config{Targets: []string{"desktop"}})
	n.Send(Notice{Kind: KindBudget, Text: text})
	closeNotifier(t, n)
	want := [][]string{{"-e", "on run argv", "-e", "display notification (item 2 of argv) with title (item 1 of argv)", "-e", "end run",
		"drover: budget crossed", text}}
	if got := runs(t, argsFile); !reflect.DeepEqual(got, want) {
		t.Errorf("osascript runs:\n got %q\nwant %q", got, want)
	}
	wantStats(t, n, TargetStats{Delivered: 1})
}

// TestCON3_DesktopOneAttempt: a failing desktop notifier is run once and
// the notice counts as failed.
func TestCON3_DesktopOneAttempt(t *testing.T) {
	argsFile := fakeNotifier(t, "notify-send", 1)
	n := newNotifier(t, Config{Targets: []string{"desktop"}})
	n.Send(Notice{Kind: KindRunEnded, Text: "done"})
	closeNotifier(t, n)
	if got := len(runs(t, argsFile)); got != 1 {
		t.Errorf("notify-send ran %d times, want 1", got)
	}
	wantStats(t, n, TargetStats{Failed: 1})
}

// TestCON3_DesktopMissing: with no notifier on PATH, New says what it
// looked for.
func TestCON3_DesktopMissing(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(Config{Targets: []string{"desktop"}})
	if err == nil || !strings.Contains(err.Error(), "notify-send") || !strings.Contains(err.Error(), "osascript") {
		t.Errorf("New = %v, want an error naming notify-send and osascript", err)
	}
}

// TestCON3_ParseTarget: what --notify accepts, and errors that show a
// bad URL only up to its host.
func TestCON3_ParseTarget(t *testing.T) {
	for _, s := range []string{"desktop", "http://127.0.0.1:8080/hook", "https://hooks.example.test/services/T/B/X?x=1",
		"https://u:p@h.example.test/", "HTTPS://H.EXAMPLE.TEST"} {
		if err := ParseTarget(s); err != nil {
			t.Errorf("ParseTarget(%q) = %v", s, err)
		}
	}
	for s, want := range map[string]string{
		"ftp://x":                            "--notify ftp://x: want an http(s) URL or 'desktop'",
		"ftp://h.test/path?token=SECRET":     "--notify ftp://h.test/…: want an http(s) URL or 'desktop'",
		"hooks.example.test/services/SECRET": "--notify hooks.example.test…: want an http(s) URL or 'desktop'",
		"deskop":                             "--notify deskop: want an http(s) URL or 'desktop'",
		"":                                   "--notify : want an http(s) URL or 'desktop'",
		"http://":                            "--notify http:…: want an http(s) URL or 'desktop'",
		"https:///SECRET":                    "--notify https:…: want an http(s) URL or 'desktop'",
		"http://:80/SECRET":                  "--notify http://:80/…: want an http(s) URL or 'desktop'",
		"mailto:me@SECRET.test":              "--notify mailto:me…: want an http(s) URL or 'desktop'",
		"http://h.test/%zz?token=SECRET":     "--notify http:…: want an http(s) URL or 'desktop'",
	} {
		err := ParseTarget(s)
		if err == nil || err.Error() != want {
			t.Errorf("ParseTarget(%q) = %v, want %q", s, err, want)
		}
		if _, err := New(Config{Targets: []string{s}}); err == nil {
			t.Errorf("New accepted %q", s)
		}
	}
}
