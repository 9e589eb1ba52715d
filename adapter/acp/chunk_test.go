package acp

import (
	"encoding/json"
	"slices"
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// textChunk takes exactly the chunks whose content the SDK decodes as a
// text block with type "text", with the same text and messageId; every
// other chunk it leaves to the SDK's decoding.
func TestTextChunkAgreesWithSDK(t *testing.T) {
	for _, update := range []string{
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello <b> ✓"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""},"messageId":"m1"}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"x","annotations":{"priority":1}},"_meta":{"a":1}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":7}}`,
		`{"sessionUpdate":"agent_message_chunk","content":{"type":"other","text":"x"}}`,
		`{"sessionUpdate":"agent_message_chunk","content":null}`,
		`{"sessionUpdate":"agent_message_chunk"}`,
	} {
		text, id, ok := textChunk([]byte(update))
		var u acpsdk.SessionUpdateAgentMessageChunk
		sdkOK := runner.Unmarshal([]byte(update), &u) == nil && u.Content.Text != nil
		if !ok {
			continue // the SDK decodes it, as before
		}
		if !sdkOK || u.Content.Text.Text != text || (id == nil) != (u.MessageId == nil) || id != nil && *id != *u.MessageId {
			t.Errorf("%s: textChunk %q %v, the SDK %v %+v", update, text, id, sdkOK, u)
		}
	}
	if _, _, ok := textChunk([]byte(`{"content":{"type":"text","text":"a"}}`)); !ok {
		t.Error("a plain text chunk was not taken")
	}
}

// Translate's one-pass decoding of text chunk lines gives the events the
// general decoding gives, line for line, and takes the lines a streamed
// turn is made of; any other line (a request, an escaped kind, content that
// is not text) goes the general way.
func TestTextChunkLineAgreesWithGeneralPath(t *testing.T) {
	upd := func(u string) string {
		return `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":` + u + `}}`
	}
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`,
		upd(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"thinking <a>"}}`),
		upd(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":" more"}}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hello "},"messageId":"m1"}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"world\n"},"messageId":"m1"}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"second"},"messageId":"m2"}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":""}}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"image","data":"AA==","mimeType":"image/png"}}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":7}}`),
		upd(`{"sessionUpdate":"\u0061gent_message_chunk","content":{"type":"text","text":"escaped kind"}}`),
		`{"jsonrpc":"2.0","id":9,"method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"a request"}}}}`,
		upd(`{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"after text"}}`),
		upd(`{"sessionUpdate":"tool_call","toolCallId":"c","title":"agent_message_chunk","kind":"execute","status":"in_progress"}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"dup","text":"licate"}}`),
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"Type":"text","TEXT":"cased names"}}`),
		upd("{\"sessionUpdate\":\"agent_message_chunk\",\"content\":{\"type\":\"text\",\"text\":\"bad \xff utf-8\"}}"),
		`{"jsonrpc":"2.0","id":"","method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"empty id"}}}}`,
		`{"jsonrpc":"2.0","id":null,"method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"null id"}}}}`,
		`{"jsonrpc":"2.0","ID":7,"Method":"session/update","params":{"update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"cased id"}}}}`,
		upd(`{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"last"}}`),
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}`,
	}
	for _, partial := range []bool{false, true} {
		sess := Session{Prompt: "p", Cwd: t.TempDir(), Tier: drover.TierAutonomous, PartialText: partial}
		fast, general := NewConversation(uestest.Stamp("t"), sess, Dialect{}), NewConversation(uestest.Stamp("t"), sess, Dialect{})
		for _, c := range []*Conversation{fast, general} {
			if _, err := c.Open(); err != nil {
				t.Fatal(err)
			}
		}
		taken := 0
		for _, l := range lines {
			if _, ok := (&Conversation{}).textChunkLine([]byte(l)); ok {
				taken++
			}
			a, errA := fast.Translate([]byte(l))
			b, errB := general.translate([]byte(l))
			fast.Outbox()
			general.Outbox()
			if (errA == nil) != (errB == nil) || !slices.EqualFunc(a, b, eventsEqual(t)) {
				t.Errorf("partial %v, %s:\n one pass %v (%v)\n general  %v (%v)", partial, l, a, errA, b, errB)
			}
		}
		if taken != 12 {
			t.Errorf("one-pass decoding took %d lines, want the 12 text chunks without an id", taken)
		}
		a, _ := fast.Finish(runner.Exit{})
		b, _ := general.Finish(runner.Exit{})
		if !slices.EqualFunc(a, b, eventsEqual(t)) {
			t.Errorf("partial %v, finish:\n one pass %v\n general  %v", partial, a, b)
		}
	}
}

func eventsEqual(t *testing.T) func(a, b drover.Event) bool {
	return func(a, b drover.Event) bool {
		ja, errA := json.Marshal(a)
		jb, errB := json.Marshal(b)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		return string(ja) == string(jb)
	}
}

// FuzzPERF2_ScanChunkLineAgrees: whatever line the scanner decodes, it
// decodes as runner.Unmarshal does.
func FuzzPERF2_ScanChunkLineAgrees(f *testing.F) {
	for _, l := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi \n\u00e9"},"messageId":"m1"}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"session/update","params":{"update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"x","annotations":null}}}}`,
		`{"method":"x","METHOD":"y"}`, `{"params":{"Update":{}}}`, `{"params":{"update":{"content":{"text":null}}}}`,
		`{"id":null,"params":{"update":{"messageId":"a","messageid":"b"}}}`, `[]`, `{"a":[1,{"b":"c"}]}`,
	} {
		f.Add([]byte(l))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got chunkLine
		if !scanChunkLine(b, &got) {
			return
		}
		var want chunkLine
		if err := runner.Unmarshal(b, &want); err != nil {
			t.Fatalf("scanned %q, runner.Unmarshal: %v", b, err)
		}
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if string(gj) != string(wj) {
			t.Fatalf("%q: scanned %s, runner.Unmarshal %s", b, gj, wj)
		}
	})
}
