package metrics_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/metrics"
	"github.com/drover-run/drover/runs"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// OBS-2: a run's observer counts its start, events, answers and end;
// what an event could make unbounded (a behavior or an answerer drover
// does not give) is "other"; a request still waiting when its run ends no
// longer counts as pending; usage becomes tokens by kind, and a cost only
// when there is one.
func TestOBS2_Collector(t *testing.T) {
	m := metrics.New(nil)
	r := m.RunStarted("claude-code")
	r.Recorded(3 * time.Millisecond)
	r.Recorded(time.Millisecond)
	r.Asked()
	r.Asked()
	r.Answered(drover.Allow, drover.ByClient, true)
	r.Answered(drover.Deny, drover.ByRule, false)
	r.Answered("maybe", "someone", false)
	cached, reasoning := int64(7), int64(0)
	r.Ended(runs.RunEnd{Outcome: drover.OutcomeCompleted, Model: "opus",
		Usage: drover.Usage{InputTokens: 10, OutputTokens: 4, CacheReadTokens: &cached, ReasoningTokens: &reasoning}})
	free := m.RunStarted("codex")
	free.Ended(runs.RunEnd{Outcome: drover.OutcomeCancelled})

	want := `
# HELP drover_runs_started_total Runs this process started executing, by agent.
# TYPE drover_runs_started_total counter
drover_runs_started_total{agent="claude-code"} 1
drover_runs_started_total{agent="codex"} 1
# HELP drover_runs_ended_total Runs this process executed that ended, by agent and outcome (completed, failed, cancelled, interrupted, timed_out, max_turns, max_budget).
# TYPE drover_runs_ended_total counter
drover_runs_ended_total{agent="claude-code",outcome="completed"} 1
drover_runs_ended_total{agent="codex",outcome="cancelled"} 1
# HELP drover_runs_running Runs this process is executing now, by agent.
# TYPE drover_runs_running gauge
drover_runs_running{agent="claude-code"} 0
drover_runs_running{agent="codex"} 0
# HELP drover_events_total Events of this process's runs recorded in the ledger (committed), by agent.
# TYPE drover_events_total counter
drover_events_total{agent="claude-code"} 2
drover_events_total{agent="codex"} 0
# HELP drover_permission_requests_pending Permission requests of this process's runs waiting for an answer.
# TYPE drover_permission_requests_pending gauge
drover_permission_requests_pending 0
# HELP drover_permission_answers_total Answers to permission requests of this process's runs, by agent, behavior (allow, deny) and who answered (rule, callback, client, deadline, default, run_end, agent).
# TYPE drover_permission_answers_total counter
drover_permission_answers_total{agent="claude-code",behavior="allow",by="client"} 1
drover_permission_answers_total{agent="claude-code",behavior="deny",by="rule"} 1
drover_permission_answers_total{agent="claude-code",behavior="other",by="other"} 1
# HELP drover_tokens_total Tokens of the runs this process executed, from each run's usage at its end, by agent, model and kind (input, output, cache_read, cache_write, reasoning).
# TYPE drover_tokens_total counter
drover_tokens_total{agent="claude-code",kind="cache_read",model="opus"} 7
drover_tokens_total{agent="claude-code",kind="input",model="opus"} 10
drover_tokens_total{agent="claude-code",kind="output",model="opus"} 4
`
	names := []string{"drover_runs_started_total", "drover_runs_ended_total", "drover_runs_running", "drover_events_total",
		"drover_permission_requests_pending", "drover_permission_answers_total", "drover_tokens_total", "drover_cost_usd_total"}
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(m.Registry(), "drover_ledger_commit_seconds"); err != nil || n != 1 {
		t.Fatalf("commit histogram: %d series, %v", n, err)
	}

	cost, refund := 0.25, -1.0
	paid := m.RunStarted("claude-code")
	paid.Ended(runs.RunEnd{Outcome: drover.OutcomeFailed, Usage: drover.Usage{TotalCostUSD: &cost}})
	odd := m.RunStarted("claude-code")
	odd.Ended(runs.RunEnd{Outcome: drover.OutcomeFailed, Model: "opus", Usage: drover.Usage{TotalCostUSD: &refund}})
	want = `
# HELP drover_cost_usd_total Cost in US dollars of the runs this process executed that reported or were priced one, at their end, by agent and model.
# TYPE drover_cost_usd_total counter
drover_cost_usd_total{agent="claude-code",model="unknown"} 0.25
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "drover_cost_usd_total"); err != nil {
		t.Fatal(err)
	}
}

// OBS-2: the queue's gauges are read at each scrape; a read that fails
// leaves them out of that scrape, and the rest is served.
func TestOBS2_QueueGauges(t *testing.T) {
	m := metrics.New(nil)
	var stats metrics.QueueStats
	var fail error
	m.AddQueue(func(ctx context.Context) (metrics.QueueStats, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("the queue is read without a deadline")
		}
		return stats, fail
	})
	stats = metrics.QueueStats{Queued: 3, LiveWorkers: 2}
	want := `
# HELP drover_queue_depth Queued runs no worker has claimed yet (the shared queue of the PostgreSQL ledger).
# TYPE drover_queue_depth gauge
drover_queue_depth 3
# HELP drover_workers_live drover workers heartbeating within their lease, neither stopped nor lost.
# TYPE drover_workers_live gauge
drover_workers_live 2
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "drover_queue_depth", "drover_workers_live"); err != nil {
		t.Fatal(err)
	}
	fail = errors.New("database down")
	if _, err := m.Registry().Gather(); err == nil || !strings.Contains(err.Error(), "database down") {
		t.Fatalf("gather with the queue down: %v", err)
	}
}

// BenchmarkRecorded is what an observed run adds to each of its events:
// the two clock readings of runs' recorder and the observer's Recorded
// (an event counted, a commit time observed). It must not allocate.
func BenchmarkRecorded(b *testing.B) {
	m := metrics.New(nil)
	r := m.RunStarted("claude-code")
	epoch := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		at := time.Since(epoch)
		r.Recorded(time.Since(epoch) - at)
	}
}
