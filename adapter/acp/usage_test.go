package acp

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// TestACP1_UsageUpdateCostTranslated: the translator's reading of
// usage_update sequences, line by line: done.usage.totalCostUsd is the
// last cost reported after the prompt was sent, less the last reported
// before it (during session/load, or before the prompt went out); never
// negative (a lower cost is a session that started over); only in USD; an
// update whose cost is missing, negative or unreadable is ignored; a
// failed prompt still reports what was spent.
func TestACP1_UsageUpdateCostTranslated(t *testing.T) {
	usage := func(cost string) string {
		u := `{"sessionUpdate":"usage_update","used":10,"size":100`
		if cost != "" {
			u += `,"cost":` + cost
		}
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + u + `}}}`
	}
	usd := func(a float64) string { return usage(fmt.Sprintf(`{"amount":%v,"currency":"USD"}`, a)) }
	const (
		initialized = `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`
		started     = `{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`
		modeSet     = `{"jsonrpc":"2.0","id":3,"result":{}}`
		answered    = `{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`
		answeredM   = `{"jsonrpc":"2.0","id":4,"result":{"stopReason":"end_turn"}}`
		failed      = `{"jsonrpc":"2.0","id":3,"error":{"code":-32603,"message":"Internal error: boom"}}`
	)
	none := -1.0
	for _, c := range []struct {
		name        string
		resume      string
		mode        string
		lines       []string
		cost        float64
		sessionCost any
		status      drover.DoneStatus
	}{
		{name: "two updates", lines: []string{initialized, started, usd(0.01), usd(0.03), answered}, cost: 0.03},
		{name: "continued: cost at load", resume: "s1",
			lines: []string{initialized, usd(0.03), started, usd(0.05), answered}, cost: 0.02, sessionCost: 0.05},
		{name: "continued: cost before the prompt", mode: "m",
			lines: []string{initialized, started, usd(0.03), modeSet, usd(0.05), answeredM}, cost: 0.02},
		{name: "continued: cost at load only", resume: "s1",
			lines: []string{initialized, usd(0.03), started, answered}, cost: none},
		{name: "continued: nothing reported before", resume: "s1",
			lines: []string{initialized, started, usd(0.05), answered}, cost: 0.05, sessionCost: 0.05},
		{name: "started over", resume: "s1",
			lines: []string{initialized, usd(0.03), started, usd(0.01), answered}, cost: 0.01, sessionCost: 0.01},
		{name: "not USD", lines: []string{initialized, started, usage(`{"amount":0.01,"currency":"EUR"}`), answered}, cost: none},
		{name: "no currency", lines: []string{initialized, started, usage(`{"amount":0.01}`), answered}, cost: none},
		{name: "EUR before the prompt", resume: "s1",
			lines: []string{initialized, usage(`{"amount":0.03,"currency":"EUR"}`), started, usd(0.05), answered}, cost: 0.05, sessionCost: 0.05},
		{name: "lower case usd", lines: []string{initialized, started, usage(`{"amount":0.04,"currency":"usd"}`), answered}, cost: 0.04},
		{name: "no cost", lines: []string{initialized, started, usage(""), usage(`null`), answered}, cost: none},
		{name: "bad amounts ignored", lines: []string{initialized, started, usd(0.02),
			usage(`{"amount":-1,"currency":"USD"}`), usage(`{"currency":"USD"}`), usage(`{"amount":"x","currency":"USD"}`),
			usage(`{"amount":1e999,"currency":"USD"}`), answered}, cost: 0.02},
		{name: "no usage_update", lines: []string{initialized, started, answered}, cost: none},
		{name: "failed prompt", lines: []string{initialized, started, usd(0.01), failed}, cost: 0.01, status: drover.StatusError},
	} {
		t.Run(c.name, func(t *testing.T) {
			conv := NewConversation(uestest.Stamp("t"), Session{Prompt: "p", Cwd: t.TempDir(), Tier: drover.TierAutonomous,
				Resume: c.resume, Mode: c.mode}, Dialect{})
			if _, err := conv.Open(); err != nil {
				t.Fatal(err)
			}
			var evs []drover.Event
			for _, l := range c.lines {
				out, err := conv.Translate([]byte(l))
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				evs = append(evs, out...)
				conv.Outbox()
			}
			end, _ := conv.Finish(runner.Exit{})
			evs = append(evs, end...)
			ev := evs[len(evs)-1]
			d, ok := ev.Done()
			if !ok {
				t.Fatalf("last event %v, want done", uestest.Types(evs))
			}
			if want := c.status; want != "" && d.Status != want || want == "" && d.Status != drover.StatusSuccess {
				t.Errorf("status %s", d.Status)
			}
			switch got := d.Usage.TotalCostUSD; {
			case c.cost < 0 && got != nil:
				t.Errorf("totalCostUsd %v, want none", *got)
			case c.cost >= 0 && (got == nil || *got != c.cost):
				t.Errorf("totalCostUsd %v, want %v", got, c.cost)
			}
			if d.Usage.CostEstimated {
				t.Error("costEstimated: the vendor's figure is not an estimate")
			}
			if got := ev.Metadata[drover.MetaSessionCostUSD]; got != c.sessionCost {
				t.Errorf("metadata %s %v, want %v", drover.MetaSessionCostUSD, got, c.sessionCost)
			}
		})
	}
}

// TestACP1_UsageUpdateOpenCodeCapture replays what OpenCode 1.18.33 sent
// (testdata/opencode-1.18.33): a new session's run costs the cost it
// reports; a resumed session's run is reported the session's running total,
// since OpenCode reports no cost while session/load replays the history
// (nothing was reported before the prompt: 0), with that total as
// metadata sessionCostUsd, by which a failover chain that counted the
// session's earlier run counts only this run's share.
func TestACP1_UsageUpdateOpenCodeCapture(t *testing.T) {
	for _, c := range []struct {
		file, resume string
		cost         float64
		sessionCost  any
	}{
		{file: "usage_new.jsonl", cost: 0.000105},
		{file: "usage_resumed.jsonl", resume: "ses_ddce944b0ffeIEGl8F77xjK4QN", cost: 0.00021, sessionCost: 0.00021},
	} {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", "opencode-1.18.33", c.file))
			if err != nil {
				t.Fatal(err)
			}
			conv := NewConversation(uestest.Stamp("opencode"), Session{Prompt: "say hello", Cwd: t.TempDir(),
				Tier: drover.TierAutonomous, Resume: c.resume}, Dialect{})
			if _, err := conv.Open(); err != nil {
				t.Fatal(err)
			}
			var evs []drover.Event
			for l := range bytes.Lines(data) {
				out, err := conv.Translate(bytes.TrimSpace(l))
				if err != nil {
					t.Fatalf("%s: %v", l, err)
				}
				evs = append(evs, out...)
				conv.Outbox()
			}
			end, _ := conv.Finish(runner.Exit{})
			evs = append(evs, end...)
			n := 0
			for _, ev := range evs {
				if ev.Type == "opencode:usage_update" {
					n++
				}
			}
			ev := evs[len(evs)-1]
			d, _ := ev.Done()
			if n != 1 || d.Status != drover.StatusSuccess || d.Usage.InputTokens != 10 || d.Usage.OutputTokens != 5 ||
				d.Usage.TotalCostUSD == nil || *d.Usage.TotalCostUSD != c.cost || d.Usage.CostEstimated ||
				ev.Metadata[drover.MetaSessionCostUSD] != c.sessionCost {
				t.Fatalf("events %v; done %+v (cost %v) %v", uestest.Types(evs), d, d.Usage.TotalCostUSD, ev.Metadata)
			}
		})
	}
}
