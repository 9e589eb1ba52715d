// Package metrics is drover's Prometheus telemetry (OBS-2,
// docs/telemetry.md): a runs.Observer that counts the runs a supervisor
// executes, their events, ledger commits, permission requests and
// answers, tokens and cost, in a registry of its own (never the
// process-wide default one), and the handler that serves it. Labels are
// agents, models, outcomes and who answered: bounded sets, never a run's
// id or prompt.
package metrics

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
)

// Metrics holds drover's metrics and the registry they are served from.
// It is a runs.Observer: give it to runs.Config.Observer.
type Metrics struct {
	reg *prometheus.Registry
	log *slog.Logger

	started *prometheus.CounterVec // agent
	ended   *prometheus.CounterVec // agent, outcome
	running *prometheus.GaugeVec   // agent
	events  *prometheus.CounterVec // agent
	commit  prometheus.Histogram
	pending prometheus.Gauge
	answers *prometheus.CounterVec // agent, behavior, by
	tokens  *prometheus.CounterVec // agent, model, kind
	cost    *prometheus.CounterVec // agent, model
}

var _ runs.Observer = (*Metrics)(nil)

// CommitBuckets are the buckets of drover_ledger_commit_seconds, from
// 100 µs (a group commit on a fast disk) to 10 s (a ledger in trouble).
var CommitBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// New returns drover's metrics in a new registry, which also holds the Go
// runtime's and the process's standard collectors (go_*, process_*).
// log receives what a scrape could not collect (nil: quiet).
func New(log *slog.Logger) *Metrics {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m := &Metrics{reg: prometheus.NewRegistry(), log: log,
		started: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_runs_started_total",
			Help: "Runs this process started executing, by agent."}, []string{"agent"}),
		ended: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_runs_ended_total",
			Help: "Runs this process executed that ended, by agent and outcome (completed, failed, cancelled, interrupted, timed_out, max_turns, max_budget)."},
			[]string{"agent", "outcome"}),
		running: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "drover_runs_running",
			Help: "Runs this process is executing now, by agent."}, []string{"agent"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_events_total",
			Help: "Events of this process's runs recorded in the ledger (committed), by agent."}, []string{"agent"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "drover_ledger_commit_seconds",
			Help:    "Time from an event handed to the ledger's writer to its commit, per event.",
			Buckets: CommitBuckets}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "drover_permission_requests_pending",
			Help: "Permission requests of this process's runs waiting for an answer."}),
		answers: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_permission_answers_total",
			Help: "Answers to permission requests of this process's runs, by agent, behavior (allow, deny) and who answered (rule, callback, client, deadline, default, run_end, agent)."},
			[]string{"agent", "behavior", "by"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_tokens_total",
			Help: "Tokens of the runs this process executed, from each run's usage at its end, by agent, model and kind (input, output, cache_read, cache_write, reasoning)."},
			[]string{"agent", "model", "kind"}),
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "drover_cost_usd_total",
			Help: "Cost in US dollars of the runs this process executed that reported or were priced one, at their end, by agent and model."},
			[]string{"agent", "model"}),
	}
	m.reg.MustRegister(m.started, m.ended, m.running, m.events, m.commit, m.pending, m.answers, m.tokens, m.cost,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the metrics are served from; tests gather
// from it, and callers may register collectors of their own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in Prometheus's exposition formats. A
// collector that fails (the queue's, when the database does not answer)
// is logged and left out; the rest is served.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		ErrorLog:      logAdapter{m.log},
		ErrorHandling: promhttp.ContinueOnError,
	})
}

type logAdapter struct{ log *slog.Logger }

func (l logAdapter) Println(v ...any) {
	l.log.Warn("metrics: " + fmt.Sprint(v...))
}

// RunStarted implements runs.Observer: the run's counters are looked up
// once here, so that its events cost atomic adds only.
func (m *Metrics) RunStarted(agent string) runs.RunObserver {
	m.started.WithLabelValues(agent).Inc()
	r := &run{m: m, agent: agent, running: m.running.WithLabelValues(agent), events: m.events.WithLabelValues(agent)}
	r.running.Inc()
	return r
}

// run observes one run.
type run struct {
	m       *Metrics
	agent   string
	running prometheus.Gauge
	events  prometheus.Counter
	waiting int // requests Asked and not Answered; the run's goroutine's
}

func (r *run) Recorded(wait time.Duration) {
	r.events.Inc()
	r.m.commit.Observe(wait.Seconds())
}

func (r *run) Asked() {
	r.waiting++
	r.m.pending.Inc()
}

func (r *run) Answered(behavior drover.Behavior, by drover.AnswerSource, waited bool) {
	if waited {
		r.waiting--
		r.m.pending.Dec()
	}
	r.m.answers.WithLabelValues(r.agent, bounded(string(behavior), behaviors), bounded(string(by), sources)).Inc()
}

func (r *run) Ended(e runs.RunEnd) {
	m := r.m
	r.running.Dec()
	if r.waiting > 0 {
		m.pending.Sub(float64(r.waiting))
		r.waiting = 0
	}
	m.ended.WithLabelValues(r.agent, string(e.Outcome)).Inc()
	model := e.Model
	if model == "" {
		model = "unknown"
	}
	u := e.Usage
	add := func(kind string, n int64) {
		if n > 0 {
			m.tokens.WithLabelValues(r.agent, model, kind).Add(float64(n))
		}
	}
	opt := func(n *int64) int64 {
		if n == nil {
			return 0
		}
		return *n
	}
	add("input", u.InputTokens)
	add("output", u.OutputTokens)
	add("cache_read", opt(u.CacheReadTokens))
	add("cache_write", opt(u.CacheWriteTokens))
	add("reasoning", opt(u.ReasoningTokens))
	if c := u.TotalCostUSD; c != nil && *c >= 0 { // a counter never goes down
		m.cost.WithLabelValues(r.agent, model).Add(*c)
	}
}

// The label values answers may take: what drover's engine gives; anything
// else is "other", so that a label set stays bounded whatever an event says.
var (
	behaviors = []string{string(drover.Allow), string(drover.Deny)}
	sources   = []string{string(drover.ByRule), string(drover.ByCallback), string(drover.ByClient), string(drover.ByDeadline),
		string(drover.ByDefault), string(drover.ByRunEnd), string(drover.ByAgent)}
)

func bounded(v string, known []string) string {
	for _, k := range known {
		if v == k {
			return v
		}
	}
	return "other"
}

// QueueStats is what the shared run queue looks like (drover worker).
type QueueStats struct {
	// Queued is how many queued runs no worker has claimed yet.
	Queued int
	// LiveWorkers is how many workers are live: heartbeating within
	// their lease, neither stopped nor lost.
	LiveWorkers int
}

// ScrapeTimeout bounds each read of AddQueue's function.
const ScrapeTimeout = 2 * time.Second

// AddQueue adds drover_queue_depth and drover_workers_live, read by read
// at each scrape within ScrapeTimeout. A read that fails leaves both out
// of that scrape (and is logged).
func (m *Metrics) AddQueue(read func(context.Context) (QueueStats, error)) {
	m.reg.MustRegister(&queueCollector{read: read,
		depth: prometheus.NewDesc("drover_queue_depth", "Queued runs no worker has claimed yet (the shared queue of the PostgreSQL ledger).", nil, nil),
		live:  prometheus.NewDesc("drover_workers_live", "drover workers heartbeating within their lease, neither stopped nor lost.", nil, nil)})
}

type queueCollector struct {
	read        func(context.Context) (QueueStats, error)
	depth, live *prometheus.Desc
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.depth
	ch <- c.live
}

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), ScrapeTimeout)
	defer cancel()
	s, err := c.read(ctx)
	if err != nil {
		err = fmt.Errorf("read the run queue: %w", err)
		ch <- prometheus.NewInvalidMetric(c.depth, err)
		ch <- prometheus.NewInvalidMetric(c.live, err)
		return
	}
	ch <- prometheus.MustNewConstMetric(c.depth, prometheus.GaugeValue, float64(s.Queued))
	ch <- prometheus.MustNewConstMetric(c.live, prometheus.GaugeValue, float64(s.LiveWorkers))
}
