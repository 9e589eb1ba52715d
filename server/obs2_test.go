package server_test

import (
	"net/http"
	"testing"

	"github.com/drover-run/drover/internal/metrics"
	"github.com/drover-run/drover/internal/testkit/metricstest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// OBS-2: GET /metrics serves the Prometheus metrics of the runs the
// server executes, behind the API's token: runs started and ended by
// outcome, running, events recorded and their commit times, tokens and
// cost from a run's usage, permission requests pending and answered.
func TestOBS2_MetricsOverHTTP(t *testing.T) {
	m := metrics.New(nil)
	f := newFixtureWith(t, server.Config{Token: "tok", Metrics: m.Handler()}, runs.Config{Observer: m})
	auth := []string{"Authorization", "Bearer tok"}
	if code, _ := metricstest.Get(t, f.ts.URL+"/metrics", ""); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics without the token: %d, want 401", code)
	}
	if code, _ := metricstest.Get(t, f.ts.URL+"/metrics", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("GET /metrics with a wrong token: %d, want 401", code)
	}
	scrape := func() metricstest.Families { return metricstest.Scrape(t, f.ts.URL+"/metrics", "tok") }
	value := func(fs metricstest.Families, name string, labels ...string) float64 {
		v, _ := fs.Value(name, labels...)
		return v
	}
	if fs := scrape(); fs.Sum("drover_runs_started_total") != 0 || fs["go_goroutines"] == nil {
		t.Fatalf("a fresh server: runs %v, go_goroutines %v", fs.Series("drover_runs_started_total"), fs["go_goroutines"])
	}

	// One run completes (with usage and a cost), one is cancelled.
	start := func(body string) string {
		var s runs.Started
		if code := f.do(t, "POST", "/v1/runs", body, &s, auth...); code != http.StatusCreated {
			t.Fatalf("start %s: %d", body, code)
		}
		return s.RunID
	}
	costly := start(`{"agent":"costly","prompt":"go","options":{"model":"m-1"}}`)
	hang := start(`{"agent":"hang","prompt":"go"}`)
	f.waitSeq(t, hang, 1)
	metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		return value(fs, "drover_runs_running", "agent", "hang") == 1
	}, "drover_runs_running")
	if code := f.do(t, "POST", "/v1/runs/"+hang+"/cancel", "", nil, auth...); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	rs := f.await(t, costly, hang)
	if rs[0].Status != store.StatusCompleted || rs[1].Outcome() != "cancelled" {
		t.Fatalf("runs: %s %s", rs[0].Outcome(), rs[1].Outcome())
	}
	events := rs[0].LastSeq + rs[1].LastSeq
	names := []string{"drover_runs_started_total", "drover_runs_ended_total", "drover_runs_running", "drover_events_total",
		"drover_tokens_total", "drover_cost_usd_total", "drover_ledger_commit_seconds"}
	fs := metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		return fs.Sum("drover_runs_ended_total") == 2 && fs.Sum("drover_events_total") == float64(events)
	}, names...)
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"drover_runs_started_total", []string{"agent", "costly"}, 1},
		{"drover_runs_started_total", []string{"agent", "hang"}, 1},
		{"drover_runs_ended_total", []string{"agent", "costly", "outcome", "completed"}, 1},
		{"drover_runs_ended_total", []string{"agent", "hang", "outcome", "cancelled"}, 1},
		{"drover_runs_running", []string{"agent", "costly"}, 0},
		{"drover_runs_running", []string{"agent", "hang"}, 0},
		{"drover_events_total", []string{"agent", "costly"}, float64(rs[0].LastSeq)},
		{"drover_events_total", []string{"agent", "hang"}, float64(rs[1].LastSeq)},
		{"drover_tokens_total", []string{"agent", "costly", "model", "m-1", "kind", "input"}, 1200},
		{"drover_tokens_total", []string{"agent", "costly", "model", "m-1", "kind", "output"}, 340},
		{"drover_cost_usd_total", []string{"agent", "costly", "model", "m-1"}, 0.5},
		{"drover_ledger_commit_seconds", nil, float64(events)}, // one observation per event
		{"drover_permission_requests_pending", nil, 0},
	} {
		if got, ok := fs.Value(c.name, c.labels...); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v; series %v", c.name, c.labels, got, ok, c.want, fs.Series(c.name))
		}
	}
	if got := fs.Sum("drover_runs_started_total"); got != 2 {
		t.Errorf("runs started %v, want 2", got)
	}
	if got := fs.Series("drover_tokens_total"); len(got) != 2 {
		t.Errorf("token series %v: want input and output only (no cache or reasoning reported)", got)
	}
	if got := fs.Sum("drover_cost_usd_total"); got != 0.5 {
		t.Errorf("cost %v: want only the run that had one", got)
	}

	// A permission request waits, is answered by a client, and the run
	// completes.
	ask := start(`{"agent":"asker","prompt":"build","options":{"approvalTimeout":"1m"}}`)
	metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		return value(fs, "drover_permission_requests_pending") == 1
	}, "drover_permission_requests_pending")
	if code := f.do(t, "POST", "/v1/runs/"+ask+"/respond", `{"requestId":"q1","behavior":"allow"}`, nil, auth...); code != http.StatusOK {
		t.Fatalf("respond: %d", code)
	}
	fs = metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		return value(fs, "drover_permission_answers_total", "agent", "asker", "behavior", "allow", "by", "client") == 1
	}, "drover_permission_answers_total", "drover_permission_requests_pending")
	if got := value(fs, "drover_permission_requests_pending"); got != 0 {
		t.Errorf("pending %v after the answer, want 0", got)
	}
	if code := f.do(t, "POST", "/v1/runs/"+ask+"/steer", `{"message":"stop"}`, nil, auth...); code != http.StatusOK {
		t.Fatalf("steer: %d", code)
	}
	f.await(t, ask)
	metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		return value(fs, "drover_runs_ended_total", "agent", "asker", "outcome", "completed") == 1 &&
			fs.Sum("drover_runs_running") == 0 && fs.Sum("drover_runs_started_total") == 3
	}, "drover_runs_ended_total", "drover_runs_running", "drover_runs_started_total")
}

// OBS-2: a request left unanswered when its run ends no longer counts as
// pending (it is answered run_end); a server without a token serves
// /metrics to loopback names only, as every endpoint.
func TestOBS2_PendingEndsWithTheRun(t *testing.T) {
	m := metrics.New(nil)
	f := newFixtureWith(t, server.Config{Metrics: m.Handler()}, runs.Config{Observer: m})
	scrape := func() metricstest.Families { return metricstest.Scrape(t, f.ts.URL+"/metrics", "") }
	var s runs.Started
	if code := f.do(t, "POST", "/v1/runs", `{"agent":"asker","prompt":"build","options":{"approvalTimeout":"1m"}}`, &s); code != http.StatusCreated {
		t.Fatalf("start: %d", code)
	}
	metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		v, _ := fs.Value("drover_permission_requests_pending")
		return v == 1
	}, "drover_permission_requests_pending")
	if code := f.do(t, "POST", "/v1/runs/"+s.RunID+"/cancel", "", nil); code != http.StatusOK {
		t.Fatalf("cancel: %d", code)
	}
	f.await(t, s.RunID)
	metricstest.Poll(t, scrape, func(fs metricstest.Families) bool {
		pending, _ := fs.Value("drover_permission_requests_pending")
		ended, _ := fs.Value("drover_runs_ended_total", "agent", "asker", "outcome", "cancelled")
		answered, _ := fs.Value("drover_permission_answers_total", "agent", "asker", "behavior", "deny", "by", "run_end")
		return pending == 0 && ended == 1 && answered == 1
	}, "drover_permission_requests_pending", "drover_runs_ended_total", "drover_permission_answers_total")
	req, err := http.NewRequest("GET", f.ts.URL+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebound.example:8765"
	resp, err := f.ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("GET /metrics for a host that is not loopback, without a token: %d, want 403", resp.StatusCode)
	}
}
