package codex

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/jsonrpc"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// twoPassItem is how an item notification's params were decoded before
// itemOf: the item kept as raw bytes, then decoded into an appItem.
func twoPassItem(params json.RawMessage) (appItem, bool) {
	var p struct {
		Item json.RawMessage `json:"item"`
	}
	var it appItem
	if runner.Unmarshal(params, &p) != nil || runner.Unmarshal(p.Item, &it) != nil || it.Type == "" {
		return appItem{}, false
	}
	return it, true
}

// PERF-1: itemOf, one pass over an item notification's params, agrees
// with the two passes it replaced on every captured app-server line and on
// params of every other shape.
func TestPERF1_ItemDecodedInOnePassAgreesWithTwoPasses(t *testing.T) {
	params := []string{
		`{"item":{"type":"agentMessage","id":"i1","text":"hi"},"threadId":"t","turnId":"u"}`,
		`{"item":{"type":"commandExecution","id":"c","command":"ls","status":"completed","aggregatedOutput":"a\nb","exitCode":0}}`,
		`{"item":{"type":"reasoning","id":"r","summary":["s"],"content":["c"]}}`,
		`{"item":{"type":"fileChange","id":"f","changes":[{"path":"a","kind":{"type":"update","move_path":null}}],"status":"completed"}}`,
		`{"item":{"type":"agentMessage","text":5}}`,
		`{"item":{"type":"commandExecution","exitCode":"zero","command":"ls"},"after":1}`,
		`{"item":{"id":"no type"}}`,
		`{"item":"a string"}`,
		`{"item":null}`,
		`{"item":[1,2]}`,
		`{}`,
		`[1,2]`,
		`"params"`,
		`{"item":{"type":"agentMessage","text":"first"},"item":{"type":"agentMessage","text":"second"}}`,
		`{"ITEM":{"TYPE":"agentMessage","Text":"cased"}}`,
		"{\"item\":{\"type\":\"agentMessage\",\"text\":\"bad \xff utf8\"}}",
		`{"item":{"type":"agentMessage","text":"x","extra":{"deep":[{"a":[true,null,1.5]}]}}}`,
	}
	for _, c := range uestest.Captures(t) {
		for _, l := range c.Lines(t) {
			var m jsonrpc.Message
			if runner.Unmarshal(l, &m) == nil && strings.HasPrefix(m.Method, "item/") && len(m.Params) > 0 {
				params = append(params, string(m.Params))
			}
		}
	}
	for _, p := range params {
		want, wantOK := twoPassItem(json.RawMessage(p))
		got, ok := itemOf(json.RawMessage(p))
		if ok != wantOK || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n one pass: %v %+v\n two passes: %v %+v", p, ok, got, wantOK, want)
		}
	}
}

// BenchmarkTranslateAgentMessage measures the line that dominates a long
// app-server run (and scripts/bench's codex shape): an agent message's
// item/completed.
func BenchmarkTranslateAgentMessage(b *testing.B) {
	line := []byte(`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"msg_0123456789abcdef","text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog; ", 3) + `","phase":null},` +
		`"threadId":"0199a213-81c0-7800-8aa1-bbab2a035a53","turnId":"0199a213-81c0-7800-8aa1-bbab2a035a54"}}`)
	c := newBenchConversation(b, drover.Options{})
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		evs, err := c.Translate(line)
		if err != nil || len(evs) != 1 {
			b.Fatal(evs, err)
		}
	}
}

// BenchmarkTranslateAgentMessageDelta measures a line the general
// decoding reads, the most frequent one of a run with partial text: a
// delta of the agent's message.
func BenchmarkTranslateAgentMessageDelta(b *testing.B) {
	line := []byte(`{"method":"item/agentMessage/delta","params":{"threadId":"01a21066-63f6-71b2-8e6d-93050215d97f",` +
		`"turnId":"01a21066-6430-7782-92cb-34d0fe134b91","itemId":"msg_c3b547fb5e87b5122f294b0c","delta":"streamed "},"emittedAtMs":1795571475653}`)
	c := newBenchConversation(b, drover.Options{PartialText: true})
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		evs, err := c.Translate(line)
		if err != nil || len(evs) != 1 {
			b.Fatal(evs, err)
		}
	}
}

// newBenchConversation is a live conversation of opts whose thread has
// started.
func newBenchConversation(b *testing.B, opts drover.Options) *conversation {
	b.Helper()
	c := newConversation(runner.Stamp{Agent: ID, SessionID: "s", Now: time.Now}, runInfo{cwd: b.TempDir()}, "p", opts)
	c.startThread("t", "")
	return c
}

// generalItemLine is how Translate reads an item notification without the
// scanner: the envelope, then itemOf of its params.
func generalItemLine(raw []byte) (string, appItem, bool) {
	var m jsonrpc.Message
	if runner.Unmarshal(raw, &m) != nil || len(m.ID) > 0 || m.Method != "item/completed" && m.Method != "item/started" {
		return "", appItem{}, false
	}
	it, ok := itemOf(m.Params)
	return m.Method, it, ok
}

// FuzzPERF2_ScanItemLineAgrees: whatever line scanItemLine reads, the
// general decoding reads the same item notification from it.
func FuzzPERF2_ScanItemLineAgrees(f *testing.F) {
	for _, l := range []string{
		`{"method":"item/completed","params":{"item":{"type":"agentMessage","moderation":null,"id":"msg_1","text":"hi \n\u00e9","phase":null},"threadId":"t","turnId":"u"},"emittedAtMs":1}`,
		`{"method":"item/started","params":{"item":{"type":"reasoning","id":"r","text":""}}}`,
		`{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"c","command":"ls"}}}`,
		`{"id":3,"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":"x"}}}`,
		`{"method":"item/completed","Method":"turn/started","params":{"item":{"type":"agentMessage"}}}`,
		`{"method":"item/completed","params":{"item":{"type":"agentMessage","text":"a"},"Item":{"type":"x"}}}`,
		`{"method":"item/completed","params":{"item":{"TYPE":"agentMessage","text":"a"}}}`,
		`{"method":"item/completed","params":{"item":{"text":"no type"}}}`,
	} {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		method, got, ok := scanItemLine(b)
		if !ok {
			return
		}
		wantMethod, want, wantOK := generalItemLine(b)
		if !wantOK || method != wantMethod || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n scanned %q %+v\n general %v %q %+v", b, method, got, wantOK, wantMethod, want)
		}
	})
}

// PERF-2: the scanner takes the lines a long app-server run is made of,
// and Translate gives the same events for every captured line as the
// general decoding.
func TestPERF2_ScanItemLineTakesAgentMessages(t *testing.T) {
	taken := 0
	for _, c := range uestest.Captures(t) {
		for _, l := range c.Lines(t) {
			if _, _, ok := scanItemLine(l); ok {
				taken++
				_, _, wantOK := generalItemLine(l)
				if !wantOK {
					t.Errorf("scanned a line the general decoding does not take: %s", l)
				}
			}
		}
	}
	if taken == 0 {
		t.Error("no captured agent message line taken by the scanner")
	}
	line := []byte(`{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"m","text":"x","phase":null},"threadId":"t"}}`)
	if _, _, ok := scanItemLine(line); !ok {
		t.Error("the bench shape's line not taken")
	}
}
