package claude

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// translate runs lines through a translator (resumed: with a resume
// token) and returns its done.
func translate(t *testing.T, resumed bool, lines ...[]byte) (drover.DonePayload, map[string]any) {
	t.Helper()
	tr := newTranslator(uestest.Stamp(ID), resumed)
	var evs []drover.Event
	for _, l := range lines {
		out, err := tr.Translate(l)
		if err != nil {
			t.Fatalf("%s: %v", l, err)
		}
		evs = append(evs, out...)
	}
	end, rejected := tr.Finish(runner.Exit{})
	if rejected {
		t.Fatal("taken for a rejected resume")
	}
	evs = append(evs, end...)
	d, err := uestest.OneDoneLast(evs)
	if err != nil {
		t.Fatalf("%v: %v", err, uestest.Types(evs))
	}
	return d, evs[len(evs)-1].Metadata
}

func captureLines(t *testing.T, name string) [][]byte {
	t.Helper()
	data, err := os.ReadFile("testdata/2.1.330/" + name + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Split(bytes.TrimSpace(data), []byte("\n"))
}

// TestACC1_ClaudeResumedCostIsItsOwn: Claude's total_cost_usd is the
// session's running total, which a resumed run (--resume) starts from
// (measured: resume_ok's first run cost 0.00014, the resumed run's result
// says 0.00028); the run's cost is its own calls' (Σ costUSD of
// model_usage_since_last_result: 0.00014), with the running total as
// metadata sessionCostUsd. The same for a resumed /compact (compact: its
// result's usage is all zero, so its tokens come from the calls it made
// itself, 20/10, not from modelUsage, which has the session's 30/15).
func TestACC1_ClaudeResumedCostIsItsOwn(t *testing.T) {
	for _, c := range []struct {
		name          string
		cost, session float64
		in, out       int64
	}{
		{"resume_ok", 0.00014000000000000001, 0.00028000000000000003, 10, 5},
		{"compact", 0.00028000000000000003, 0.00042, 20, 10},
	} {
		for _, resumed := range []bool{true, false} {
			d, meta := translate(t, resumed, captureLines(t, c.name)...)
			if d.Usage.TotalCostUSD == nil || *d.Usage.TotalCostUSD != c.cost || d.Usage.CostEstimated ||
				d.Usage.InputTokens != c.in || d.Usage.OutputTokens != c.out {
				t.Errorf("%s (resume token %v): usage %+v (cost %v), want %d/%d at %v", c.name, resumed, d.Usage,
					costOf(d.Usage.TotalCostUSD), c.in, c.out, c.cost)
			}
			if got, want := meta[drover.MetaSessionCostUSD], any(c.session); resumed && got != want || !resumed && got != nil {
				t.Errorf("%s (resume token %v): metadata %s %v", c.name, resumed, drover.MetaSessionCostUSD, got)
			}
		}
	}
	// A fresh run's cost is its total, as before.
	for _, name := range []string{"text", "agent_background", "live_steer_queued"} {
		lines := captureLines(t, name)
		d, _ := translate(t, false, lines...)
		var last line
		for _, l := range lines {
			var x line
			if runner.Unmarshal(l, &x) == nil && x.Type == "result" {
				last = x
			}
		}
		if d.Usage.TotalCostUSD == nil || *d.Usage.TotalCostUSD != *last.TotalCostUSD {
			t.Errorf("%s: cost %v, want the total %v", name, costOf(d.Usage.TotalCostUSD), *last.TotalCostUSD)
		}
	}
}

// result is a result line with a running total and, unless since is "",
// model_usage_since_last_result.
func result(total float64, since string) []byte {
	s := fmt.Sprintf(`{"type":"result","subtype":"success","is_error":false,"num_turns":1,"session_id":"s","total_cost_usd":%v,"usage":{"input_tokens":10,"output_tokens":5}`, total)
	if since != "" {
		s += `,"model_usage_since_last_result":` + since
	}
	return []byte(s + "}")
}

func calls(costs ...float64) string {
	var ms []string
	for i, c := range costs {
		ms = append(ms, fmt.Sprintf(`"model-%d":{"inputTokens":10,"outputTokens":5,"costUSD":%v}`, i, c))
	}
	return "{" + strings.Join(ms, ",") + "}"
}

// TestACC1_ClaudeRunCost: how the run's cost is read from its results —
// the sum of model_usage_since_last_result over models and results; a
// result without it (an error result Claude numbers by hand, an older
// version) leaves the running total less the session's cost before this
// process, when an earlier result told it, else the running total.
func TestACC1_ClaudeRunCost(t *testing.T) {
	start := []byte(`{"type":"system","subtype":"init","session_id":"s","tools":[]}`)
	for _, c := range []struct {
		name    string
		results [][]byte
		want    float64
	}{
		{"one call", [][]byte{result(0.5, calls(0.25))}, 0.25},
		{"two models", [][]byte{result(1.75, calls(0.25, 0.5))}, 0.75},
		{"two results", [][]byte{result(1.25, calls(0.25)), result(1.75, calls(0.5))}, 0.75},
		{"nothing counted", [][]byte{result(1, `{}`)}, 0},
		{"then a result without it", [][]byte{result(1.25, calls(0.25)), result(2, "")}, 1},
		{"then a zeroed error result", [][]byte{result(1.25, calls(0.25)), result(0, "")}, 0.25},
		{"never stated: the total", [][]byte{result(1.25, "")}, 1.25},
		{"stated after a result without it", [][]byte{result(1.25, ""), result(1.75, calls(0.5))}, 1.75},
	} {
		d, meta := translate(t, true, append([][]byte{start}, c.results...)...)
		if got := d.Usage.TotalCostUSD; got == nil || *got != c.want {
			t.Errorf("%s: cost %v, want %v", c.name, costOf(got), c.want)
		}
		if meta[drover.MetaSessionCostUSD] == nil {
			t.Errorf("%s: no %s on a resumed run", c.name, drover.MetaSessionCostUSD)
		}
	}
	// No total, nothing stated: no cost.
	d, _ := translate(t, false, start, []byte(`{"type":"result","subtype":"success","session_id":"s"}`))
	if d.Usage.TotalCostUSD != nil {
		t.Errorf("cost %v, want none", *d.Usage.TotalCostUSD)
	}
}

func costOf(f *float64) any {
	if f == nil {
		return "none"
	}
	return *f
}
