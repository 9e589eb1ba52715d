package runs

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/notify"
	"github.com/drover-run/drover/internal/secret"
	"github.com/drover-run/drover/store"
)

// Notifier takes the notices of the runs a supervisor executes (CON-3):
// a permission request, a run's end, a budget crossed. Send must never
// block (internal/notify queues and delivers on its own goroutines).
type Notifier interface{ Send(notify.Notice) }

// noticeRequest tells the notifier of a permission request the run
// recorded, unless it was answered as it was asked.
func (s *Supervisor) noticeRequest(a *active, se store.Event) {
	var ev drover.Event
	if json.Unmarshal(se.JSON, &ev) != nil {
		return
	}
	p, ok := ev.Payload.(drover.PermissionRequestPayload)
	if !ok || p.AnsweredBy != "" {
		return
	}
	n := notify.Notice{Kind: notify.KindPermission, RunID: a.id, Agent: a.req.Agent, Tool: p.ToolName,
		Summary: p.Description, RequestID: p.RequestID, Host: s.cfg.Owner,
		Text: fmt.Sprintf("drover: %s run %s asks to %s — drover approve %s %s (or drover inbox)", a.req.Agent, a.id, p.Description, a.id, p.RequestID)}
	if p.Deadline > 0 {
		n.Deadline = time.UnixMilli(p.Deadline)
	}
	s.cfg.Notifier.Send(s.redactNotice(a, n))
}

// noticeEnd tells the notifier how the run ended, and that a budget was
// crossed when that ended it.
func (s *Supervisor) noticeEnd(a *active, f store.Finish) {
	r := store.Run{Status: f.Status, Error: f.Error, DoneStatus: f.DoneStatus}
	o := r.Outcome()
	summary := CallSummary(f.Usage.ToolUses, f.Allowed, f.Denied)
	text := fmt.Sprintf("drover: %s run %s %s", a.req.Agent, a.id, o)
	if o == drover.OutcomeFailed && f.Error != "" {
		text += ": " + firstLine(f.Error)
	}
	if summary != "" {
		text += " · " + summary
	}
	if c := f.Usage.TotalCostUSD; c != nil {
		text += fmt.Sprintf(" · $%.4f", *c)
	}
	n := notify.Notice{Kind: notify.KindRunEnded, RunID: a.id, Agent: a.req.Agent, Outcome: string(o),
		Summary: summary, CostUSD: f.Usage.TotalCostUSD, Host: s.cfg.Owner, Text: text}
	s.cfg.Notifier.Send(s.redactNotice(a, n))
	if o == drover.OutcomeMaxBudget {
		n.Kind = notify.KindBudget
		n.Text = fmt.Sprintf("drover: %s run %s crossed its budget of $%.4f and was stopped", a.req.Agent, a.id, a.req.Options.MaxBudgetUSD)
		s.cfg.Notifier.Send(s.redactNotice(a, n))
	}
}

// redactNotice takes out of n's text every secret the run could have
// seen: its credentials (those Redact hides of its options) and those of
// drover's own environment (SEC-3). A notice goes to a chat or a phone.
func (s *Supervisor) redactNotice(a *active, n notify.Notice) notify.Notice {
	var vals []string
	add := func(m map[string]string, all bool) {
		for k, v := range m {
			if len(v) >= 6 && (all || secret.Name(k) || secret.InURL(v)) {
				vals = append(vals, v, Redacted)
			}
		}
	}
	o := a.req.Options
	if o.Endpoint != nil && len(o.Endpoint.APIKey) >= 6 {
		vals = append(vals, o.Endpoint.APIKey, Redacted)
	}
	add(o.Env, false)
	add(s.cfg.Env, false)
	for _, m := range o.MCPServers {
		add(m.Env, false)
		add(m.Headers, false)
	}
	if o.Failover != nil {
		for _, p := range o.Failover.Profiles {
			add(p.Env, true)
		}
	}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok && len(v) >= 6 && (secret.Name(k) || secret.InURL(v)) {
			vals = append(vals, v, Redacted)
		}
	}
	if len(vals) == 0 {
		return n
	}
	r := strings.NewReplacer(vals...)
	n.Text, n.Summary = r.Replace(n.Text), r.Replace(n.Summary)
	return n
}

// CallSummary is what a summary says of a run's tool calls: "3 tool
// calls, 2 denied", "1 tool call, 1 allowed"; "" when there were none.
// calls is the vendor's count; a denial the vendor did not count as a
// call still counts.
func CallSummary(calls int64, allowed, denied int) string {
	calls = max(calls, int64(denied))
	if calls == 0 {
		return ""
	}
	s := fmt.Sprintf("%d tool call", calls)
	if calls != 1 {
		s += "s"
	}
	if allowed > 0 {
		s += fmt.Sprintf(", %d allowed", allowed)
	}
	if denied > 0 {
		s += fmt.Sprintf(", %d denied", denied)
	}
	return s
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
