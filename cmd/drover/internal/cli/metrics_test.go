package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/metricstest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/worker"
)

// OBS-2: --metrics-addr must be a loopback address (its listener has no
// token): anything else is a usage error, before drover serves or opens
// anything.
func TestOBS2_MetricsAddrLoopbackOnly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "drover.db")
	for _, args := range [][]string{
		{"serve", "--db", db, "--metrics-addr", "0.0.0.0:0"},
		{"serve", "--db", db, "--metrics-addr", ":9464"},
		{"serve", "--db", db, "--metrics-addr", "[::]:0"},
		{"serve", "--db", db, "--metrics-addr", "192.0.2.1:9464"},
		{"serve", "--db", db, "--metrics-addr", "127.0.0.1"},
		{"serve", "--stdio", "--db", db, "--metrics-addr", "0.0.0.0:0"},
		{"worker", "--db", "postgres://nobody@192.0.2.1:1/none", "--agents", "claude", "--metrics-addr", "0.0.0.0:0"},
	} {
		var out, errb bytes.Buffer
		code := Run(context.Background(), args, strings.NewReader(""), &out, &errb)
		if code != ExitUsage || !strings.Contains(errb.String(), "--metrics-addr") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message naming --metrics-addr", args, code, errb.String())
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Errorf("a refused serve created its ledger")
	}
}

// announced waits until errOut says where re's first group is served.
func announced(t *testing.T, errOut *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if m := re.FindStringSubmatch(errOut.String()); m != nil {
			return m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never announced: %q", re, errOut.String())
		}
	}
}

// OBS-2: drover serve serves its runs' metrics at /metrics behind its
// token (401 without) and, with --metrics-addr, on a loopback listener
// of their own without one: a run that completes with usage and one that
// is cancelled move the counters by one each, tokens by kind and model.
func TestOBS2_ServeMetrics(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, "ok")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	t.Setenv("DROVER_TOKEN", "tok")
	t.Chdir(t.TempDir())
	db := filepath.Join(t.TempDir(), "drover.db")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errOut syncBuffer
	exited := make(chan int, 1)
	go func() {
		// --allow-autonomous: the cancelled run sets its fake's mode in
		// its env.
		exited <- Run(ctx, []string{"serve", "--addr", "127.0.0.1:0", "--db", db, "--metrics-addr", "127.0.0.1:0", "--allow-autonomous"},
			strings.NewReader(""), &strings.Builder{}, &errOut)
	}()
	api := announced(t, &errOut, regexp.MustCompile(`serving HTTP on (http://127\.0\.0\.1:\d+)`))
	side := announced(t, &errOut, regexp.MustCompile(`metrics at (http://127\.0\.0\.1:\d+)/metrics`))
	if code, _ := metricstest.Get(t, api+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the token: %d, want 401", code)
	}
	if code, _ := metricstest.Get(t, side+"/v1/runs", "tok"); code != http.StatusNotFound {
		t.Fatalf("the metrics listener serves %s/v1/runs: %d, want 404", side, code)
	}
	do := func(method, path, body string, out any) {
		t.Helper()
		req, _ := http.NewRequest(method, api+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		c := &http.Client{}
		defer c.CloseIdleConnections()
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
		}
		if out != nil {
			if err := json.Unmarshal(b, out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
	}
	start := func(body string) string {
		var s runs.Started
		do("POST", "/v1/runs", body, &s)
		return s.RunID
	}
	var awaited struct {
		Runs []struct {
			Outcome string `json:"outcome"`
			LastSeq int64  `json:"lastSeq"`
		} `json:"runs"`
	}
	ok := start(`{"agent":"claude","prompt":"hi"}`)
	do("GET", "/v1/runs/"+ok+"/await", "", &awaited)
	okEvents := awaited.Runs[0].LastSeq
	if awaited.Runs[0].Outcome != "completed" {
		t.Fatalf("the ok run: %+v", awaited)
	}
	apiScrape := func() metricstest.Families { return metricstest.Scrape(t, api+"/metrics", "tok") }
	sideScrape := func() metricstest.Families { return metricstest.Scrape(t, side+"/metrics", "") }
	running := func(fs metricstest.Families) bool {
		v, _ := fs.Value("drover_runs_running", "agent", "claude-code")
		return v == 1
	}
	drip := start(`{"agent":"claude","prompt":"hi","options":{"env":{"` + fakeEnv + `":"drip"}}}`)
	metricstest.Poll(t, sideScrape, running, "drover_runs_running")
	do("POST", "/v1/runs/"+drip+"/cancel", "", nil)
	do("GET", "/v1/runs/"+drip+"/await", "", &awaited)
	if awaited.Runs[0].Outcome != "cancelled" {
		t.Fatalf("the drip run: %+v", awaited)
	}
	events := float64(okEvents + awaited.Runs[0].LastSeq)
	for _, scrape := range []func() metricstest.Families{apiScrape, sideScrape} {
		fs := metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
			return fs.Sum("drover_runs_ended_total") == 2 && fs.Sum("drover_events_total") == events
		}, "drover_runs_ended_total", "drover_events_total")
		for _, c := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"drover_runs_started_total", []string{"agent", "claude-code"}, 2},
			{"drover_runs_ended_total", []string{"agent", "claude-code", "outcome", "completed"}, 1},
			{"drover_runs_ended_total", []string{"agent", "claude-code", "outcome", "cancelled"}, 1},
			{"drover_runs_running", []string{"agent", "claude-code"}, 0},
			{"drover_events_total", []string{"agent", "claude-code"}, events},
			{"drover_ledger_commit_seconds", nil, events},
			// The fake's result: 3 input and 2 output tokens, $0.001, model "fake" (its init).
			{"drover_tokens_total", []string{"agent", "claude-code", "model", "fake", "kind", "input"}, 3},
			{"drover_tokens_total", []string{"agent", "claude-code", "model", "fake", "kind", "output"}, 2},
			{"drover_cost_usd_total", []string{"agent", "claude-code", "model", "fake"}, 0.001},
		} {
			if got, found := fs.Value(c.name, c.labels...); !found || got != c.want {
				t.Errorf("%s%v = %v (found %v), want %v; series %v", c.name, c.labels, got, found, c.want, fs.Series(c.name))
			}
		}
		if fs["process_resident_memory_bytes"] == nil || fs["go_goroutines"] == nil {
			t.Errorf("no process or Go runtime metrics")
		}
	}
	cancel()
	select {
	case code := <-exited:
		if code != ExitInterrupted {
			t.Fatalf("exit %d, want %d: %s", code, ExitInterrupted, errOut.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not exit")
	}
	if code, err := http.Get(side + "/metrics"); err == nil {
		code.Body.Close()
		t.Fatalf("the metrics listener outlived serve")
	}
}

// OBS-2, DIST-1: drover worker --metrics-addr serves the shared queue's
// depth (queued runs no worker claimed) and the live workers, read from
// PostgreSQL at each scrape, besides the metrics of the runs it executes.
func TestOBS2_WorkerMetrics(t *testing.T) {
	url := pgtest.NewDatabase(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, "ok")
	t.Setenv("GORACE", "atexit_sleep_ms=0")
	t.Chdir(t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var errOut syncBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- Run(ctx, []string{"worker", "--db", url, "--id", "w1", "--agents", "claude", "--lease", "2s", "--metrics-addr", "127.0.0.1:0"},
			strings.NewReader(""), &strings.Builder{}, &errOut)
	}()
	side := announced(t, &errOut, regexp.MustCompile(`metrics at (http://127\.0\.0\.1:\d+)/metrics`))
	scrape := func() metricstest.Families { return metricstest.Scrape(t, side+"/metrics", "") }
	gauges := func(depth float64) func(metricstest.Families) bool {
		return func(fs metricstest.Families) bool {
			d, okd := fs.Value("drover_queue_depth")
			l, okl := fs.Value("drover_workers_live")
			return okd && okl && d == depth && l >= 1
		}
	}
	metricstest.Poll(t, scrape, gauges(0), "drover_queue_depth", "drover_workers_live")

	// A client queues as drover serve --queue does.
	st, err := postgres.Open(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	q, err := worker.NewQueue(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	client, err := runs.New(ctx, engine.New(builtin.Registry()), st, runs.Config{Queue: q, Poll: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	// No worker carries "gpu": this run stays queued.
	gpu, err := client.Start(ctx, runs.StartRequest{Agent: "claude", Prompt: "hi", Labels: []string{"gpu"}})
	if err != nil {
		t.Fatal(err)
	}
	metricstest.Poll(t, scrape, gauges(1), "drover_queue_depth", "drover_workers_live")
	served, err := client.Start(ctx, runs.StartRequest{Agent: "claude", Prompt: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	actx, acancel := context.WithTimeout(ctx, 30*time.Second)
	defer acancel()
	rs, err := client.Await(actx, served.RunID)
	if err != nil || rs[0].Outcome() != drover.OutcomeCompleted || rs[0].Owner != worker.Owner("w1") {
		t.Fatalf("the served run: %+v %v", rs, err)
	}
	metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		ended, _ := fs.Value("drover_runs_ended_total", "agent", "claude-code", "outcome", "completed")
		return gauges(1)(fs) && ended == 1
	}, "drover_queue_depth", "drover_runs_ended_total")
	if err := client.Cancel(ctx, gpu.RunID); err != nil {
		t.Fatal(err)
	}
	metricstest.Poll(t, scrape, gauges(0), "drover_queue_depth", "drover_workers_live")
	cancel()
	select {
	case code := <-exited:
		if code != ExitInterrupted {
			t.Fatalf("exit %d, want %d: %s", code, ExitInterrupted, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("worker did not exit")
	}
}
