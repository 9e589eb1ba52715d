// Package notify tells people what a run needs or did — a permission
// request, a run's end, a crossed budget — by webhook or on the desktop,
// so nobody has to watch a screen (NTF-1). Delivery is best effort and
// never holds up a run: Send queues and returns, and one goroutine per
// target delivers.
package notify

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kind of a notice.
type Kind string

// The kinds of notice drover sends.
const (
	KindPermission Kind = "permission_request" // a run asks for permission
	KindRunEnded   Kind = "run_ended"          // a run ended, whatever its outcome
	KindBudget     Kind = "budget_crossed"     // a run's cost crossed its budget
)

// Notice is one notification: what it is about, as data and as one line
// of text. A webhook receives it as a JSON object with one more field,
// "content", a copy of "text": Slack and Mattermost show "text", Discord
// shows "content".
type Notice struct {
	Kind      Kind      `json:"kind"`
	Text      string    `json:"text"` // the line a chat shows as is; empty: Send writes one from Kind and RunID
	RunID     string    `json:"runId,omitempty"`
	Agent     string    `json:"agent,omitempty"`
	Outcome   string    `json:"outcome,omitempty"`   // run_ended: completed, failed, cancelled, interrupted, timed_out, max_turns, max_budget
	Tool      string    `json:"tool,omitempty"`      // permission_request
	Summary   string    `json:"summary,omitempty"`   // permission_request: the call in one line; run_ended: "3 tool calls, 2 denied"
	RequestID string    `json:"requestId,omitempty"` // permission_request: what answers it
	Deadline  time.Time `json:"deadline,omitzero"`   // permission_request: when it is denied unanswered
	CostUSD   *float64  `json:"costUsd,omitempty"`
	Time      time.Time `json:"time"`           // zero: Send stamps the time it was called
	Host      string    `json:"host,omitempty"` // which drover sent it
}

// Config says where notices go and how hard to try.
type Config struct {
	Targets     []string            // "desktop" or absolute http(s) URLs, checked by New as ParseTarget does
	Client      *http.Client        // nil: a client with a 10 s timeout (give yours one too); redirects are refused either way
	Redact      func(string) string // applied to every string field before sending; nil: none. Pass drover's secret redactor
	Log         *slog.Logger        // nil: quiet
	MaxAttempts int                 // per notice per webhook; 0: 5. The desktop gets one attempt
	Backoff     time.Duration       // delay before the first retry, doubling, with jitter, capped at 30 s; 0: 1 s
	QueueSize   int                 // notices waiting per target; 0: 256

	maxDelay time.Duration // the cap on a retry's delay and on Retry-After; 0: 30 s. Tests shorten it
}

// Stats counts what became of notices, per target in the order of
// Config.Targets.
type Stats struct {
	Targets []TargetStats
}

// TargetStats counts what became of the notices sent to one target.
type TargetStats struct {
	Target    string // "desktop", or a URL's scheme://host: never its userinfo, path or query, which may hold a token
	Delivered int64
	Failed    int64 // given up: refused, out of attempts, or still queued when Close gave up
	Dropped   int64 // pushed out of a full queue, or sent after Close
}

// Notifier delivers notices to its targets. Its methods are safe for
// concurrent use. Close must be called to stop its goroutines.
type Notifier struct {
	cfg       Config // with its defaults filled in
	targets   []*target
	transport *http.Transport // made by New, so Close may drop its idle connections; nil for a caller's client
	log       *slog.Logger

	// ctx bounds every delivery; it is cancelled only by Close, when its
	// ctx ends first, to abort requests, backoffs and desktop commands.
	ctx      context.Context
	cancel   context.CancelFunc
	stop     chan struct{} // closed by Close: drain the queue, then return
	stopOnce sync.Once
	done     chan struct{} // closed once every target's goroutine has returned
}

type target struct {
	name    string   // as logged and counted
	url     string   // "" for the desktop
	desktop *desktop // nil for a webhook

	mu     sync.Mutex
	queue  []Notice
	closed bool
	// wake holds at most one token: a Send while the goroutine is busy
	// leaves it there, so the goroutine looks at the queue again.
	wake chan struct{}

	delivered, failed, dropped atomic.Int64
}

// ParseTarget reports whether s is a target New accepts: "desktop", or an
// absolute http or https URL with a host. Its error names the value as
// scheme://host only, so it can be shown and logged.
func ParseTarget(s string) error {
	_, err := parseTarget(s)
	return err
}

// parseTarget returns the name of target s as it is logged.
func parseTarget(s string) (string, error) {
	if s == "desktop" {
		return s, nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", fmt.Errorf("--notify %s: want an http(s) URL or 'desktop'", shown(s))
	}
	return u.Scheme + "://" + u.Host, nil
}

// shown is s fit for an error message: of a URL its scheme://host, of
// anything else what comes before a '/', '?', '#' or '@'.
func shown(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		if d := u.Scheme + "://" + u.Host; d != s {
			return d + "/…"
		}
		return s
	}
	if i := strings.IndexAny(s, "/?#@"); i >= 0 {
		return s[:i] + "…"
	}
	return s
}

// New checks every target, looks for the desktop's notifier if a target
// is "desktop" (an error names what it looked for when there is none),
// and starts one goroutine per target. No targets is allowed: Send then
// does nothing.
func New(cfg Config) (*Notifier, error) {
	cfg.MaxAttempts = orDefault(cfg.MaxAttempts, 5)
	cfg.Backoff = orDefault(cfg.Backoff, time.Second)
	cfg.maxDelay = orDefault(cfg.maxDelay, 30*time.Second)
	cfg.QueueSize = orDefault(cfg.QueueSize, 256)
	n := &Notifier{log: cfg.Log, stop: make(chan struct{}), done: make(chan struct{})}
	for _, s := range cfg.Targets {
		name, err := parseTarget(s)
		if err != nil {
			return nil, err
		}
		t := &target{name: name, url: s, wake: make(chan struct{}, 1)}
		if s == "desktop" {
			if t.desktop, err = findDesktop(); err != nil {
				return nil, err
			}
			t.url = ""
		}
		n.targets = append(n.targets, t)
	}
	if cfg.Redact == nil {
		cfg.Redact = func(s string) string { return s }
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Client == nil {
		n.transport = http.DefaultTransport.(*http.Transport).Clone()
		cfg.Client = &http.Client{Transport: n.transport, Timeout: 10 * time.Second}
	} else {
		c := *cfg.Client
		cfg.Client = &c
	}
	// A webhook that redirects is misconfigured, and following it could
	// carry the notice to another host.
	cfg.Client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	n.cfg = cfg

	n.ctx, n.cancel = context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, t := range n.targets {
		// One goroutine per target, so a slow or dead receiver delays
		// only its own notices.
		wg.Go(func() { n.run(t) })
	}
	go func() { wg.Wait(); close(n.done) }()
	return n, nil
}

// orDefault is v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Send redacts nt and queues it for every target, and returns at once: it
// never blocks and never fails. A full queue drops its oldest notice; a
// notice sent after Close is dropped. Both are logged and counted.
func (n *Notifier) Send(nt Notice) {
	if len(n.targets) == 0 {
		return
	}
	if nt.Time.IsZero() {
		nt.Time = time.Now()
	}
	if nt.Text == "" {
		nt.Text = strings.TrimSpace(title(nt.Kind) + " " + nt.RunID)
	}
	for _, f := range []*string{(*string)(&nt.Kind), &nt.Text, &nt.RunID, &nt.Agent, &nt.Outcome, &nt.Tool, &nt.Summary, &nt.RequestID, &nt.Host} {
		*f = n.cfg.Redact(*f)
	}
	if nt.CostUSD != nil {
		// The targets' goroutines read the cost later; a copy keeps the
		// caller free to reuse its variable.
		c := *nt.CostUSD
		nt.CostUSD = &c
	}
	for _, t := range n.targets {
		t.mu.Lock()
		closed, full := t.closed, len(t.queue) >= n.cfg.QueueSize
		if full && !closed {
			t.queue[0] = Notice{}
			t.queue = t.queue[1:]
		}
		if !closed {
			t.queue = append(t.queue, nt)
		}
		t.mu.Unlock()
		switch {
		case closed:
			t.dropped.Add(1)
			n.log.Warn("notify: dropped a notice sent after close", "target", t.name, "kind", nt.Kind, "runId", nt.RunID)
			continue
		case full:
			t.dropped.Add(1)
			n.log.Warn("notify: queue full, dropped the oldest notice", "target", t.name, "size", n.cfg.QueueSize)
		}
		select {
		case t.wake <- struct{}{}:
		default:
		}
	}
}

// run delivers t's notices one at a time until Close: then it drains the
// queue, or abandons it when Close gives up.
func (n *Notifier) run(t *target) {
	for n.ctx.Err() == nil {
		if nt, ok := t.pop(); ok {
			n.deliver(t, nt)
			continue
		}
		select {
		case <-t.wake:
		case <-n.stop:
			// closed was set before stop was closed, so the queue can
			// only shrink now: once it is empty, t is done.
			nt, ok := t.pop()
			if !ok {
				return
			}
			n.deliver(t, nt)
		}
	}
	t.mu.Lock()
	left := len(t.queue)
	t.queue = nil
	t.mu.Unlock()
	if left > 0 {
		t.failed.Add(int64(left))
		n.log.Warn("notify: gave up on queued notices at close", "target", t.name, "count", left)
	}
}

func (t *target) pop() (Notice, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.queue) == 0 {
		return Notice{}, false
	}
	nt := t.queue[0]
	t.queue[0] = Notice{}
	t.queue = t.queue[1:]
	return nt, true
}

func (n *Notifier) deliver(t *target, nt Notice) {
	var err error
	if t.desktop != nil {
		err = t.desktop.show(n.ctx, nt)
	} else {
		err = n.post(t, nt)
	}
	if err != nil {
		t.failed.Add(1)
		n.log.Warn("notify: gave up on a notice", "target", t.name, "kind", nt.Kind, "runId", nt.RunID, "err", err)
		return
	}
	t.delivered.Add(1)
	n.log.Debug("notify: delivered", "target", t.name, "kind", nt.Kind, "runId", nt.RunID)
}

// Close stops taking notices and delivers what is queued, retries
// included, until ctx ends; then it aborts what is under way, counts what
// is left as failed, and returns ctx's cause. Either way it returns only
// once every goroutine of n has. Close may be called more than once.
func (n *Notifier) Close(ctx context.Context) error {
	n.stopOnce.Do(func() {
		// closed is set under each queue's lock before stop is closed,
		// so a target's goroutine that sees stop and an empty queue
		// knows no Send can add to it.
		for _, t := range n.targets {
			t.mu.Lock()
			t.closed = true
			t.mu.Unlock()
		}
		close(n.stop)
	})
	var err error
	// done first: when nothing is left to deliver, an ended ctx is no
	// failure.
	select {
	case <-n.done:
	default:
		select {
		case <-n.done:
		case <-ctx.Done():
			n.cancel()
			<-n.done
			err = fmt.Errorf("notify: close: %w", context.Cause(ctx))
			n.log.Warn("notify: close gave up on undelivered notices", "err", err)
		}
	}
	n.cancel()
	if n.transport != nil {
		n.transport.CloseIdleConnections()
	}
	return err
}

// Stats returns the counts so far.
func (n *Notifier) Stats() Stats {
	s := Stats{Targets: make([]TargetStats, len(n.targets))}
	for i, t := range n.targets {
		s.Targets[i] = TargetStats{Target: t.name, Delivered: t.delivered.Load(), Failed: t.failed.Load(), Dropped: t.dropped.Load()}
	}
	return s
}
