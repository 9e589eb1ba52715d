package claude

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// twoPass is how a line was decoded before its message was decoded in
// the line's own pass: the message kept as raw bytes, then decoded into
// its blocks, none when that failed. The one-pass decoding must agree.
func twoPass(raw []byte) (l line, blocks []block, err error) {
	var wire struct {
		line
		Message json.RawMessage `json:"message"`
	}
	if err := runner.Unmarshal(raw, &wire); err != nil {
		return line{}, nil, err
	}
	var m struct {
		Content []block `json:"content"`
	}
	if len(wire.Message) > 0 && wire.Message[0] == '{' && runner.Unmarshal(wire.Message, &m) == nil {
		blocks = m.Content
	}
	return wire.line, blocks, nil
}

// PERF-1: decoding a line's message in the line's own pass
// (runner.DecodeOrSkip) gives the blocks, the other fields and the errors
// that decoding it as raw bytes and then into blocks gave, on every
// captured line and on messages of every other shape.
func TestPERF1_MessageDecodedInOnePassAgreesWithTwoPasses(t *testing.T) {
	lines := [][]byte{
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"hi"}]},"session_id":"s"}`),
		[]byte(`{"type":"user","message":{"role":"user","content":"plain input"},"session_id":"s"}`),
		[]byte(`{"type":"user","message":{"content":42},"session_id":"s","uuid":"u"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":5},{"type":"text","text":"ok"}],"id":"m"},"session_id":"after"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"tool_use","id":"t","name":"Bash","input":"not an object"}]},"session_id":"s"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"deep","extra":{"a":[1,{"b":[true,null]}]}}],"usage":{"x":{"y":[1,2]}}},"session_id":"s"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"x"}],"content":{"not":"blocks"}},"session_id":"s"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"first"}]},"message":"then a string","session_id":"s"}`),
		[]byte(`{"type":"assistant","message":"then a string","message":{"content":[{"type":"text","text":"last"}]},"session_id":"s"}`),
		[]byte(`{"type":"system","subtype":"x","message":"a string","session_id":"s"}`),
		[]byte(`{"type":"system","message":null,"session_id":"s"}`),
		[]byte(`{"type":"system","message":[1,2,3],"session_id":"s"}`),
		[]byte(`{"type":"system","message":12.5,"session_id":"s"}`),
		[]byte(`{"TYPE":"assistant","Message":{"CONTENT":[{"Type":"text","TEXT":"cased"}]},"Session_ID":"s"}`),
		[]byte("{\"type\":\"assistant\",\"message\":{\"content\":[{\"type\":\"text\",\"text\":\"bad \xff utf8\"}]},\"session_id\":\"s\"}"),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"x"}],"content":[{"type":"text","text":"dup"}]},"session_id":"s"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"unterminated"}]`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"x"},]},"session_id":"s"}`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","text":"x"}]},"session_id":"s"} trailing`),
		[]byte(`{"type":"assistant","message":{"content":[{"type":"text","is_error":"yes","text":"x"}]},"session_id":"s"}`),
	}
	for _, c := range uestest.Captures(t) {
		lines = append(lines, c.Lines(t)...)
	}
	for _, raw := range lines {
		wantLine, wantBlocks, wantErr := twoPass(raw)
		var got line
		gotErr := runner.Unmarshal(raw, &got)
		if (gotErr == nil) != (wantErr == nil) {
			t.Errorf("%s:\n one pass: %v\n two passes: %v", raw, gotErr, wantErr)
			continue
		}
		if gotErr != nil {
			continue
		}
		if !reflect.DeepEqual(got.Message.blocks, wantBlocks) {
			t.Errorf("%s:\n one pass: %+v\n two passes: %+v", raw, got.Message.blocks, wantBlocks)
		}
		got.Message, wantLine.Message = message{}, message{}
		if !reflect.DeepEqual(got, wantLine) {
			t.Errorf("%s: the other fields differ:\n one pass: %+v\n two passes: %+v", raw, got, wantLine)
		}
	}
}

// FuzzPERF2_ScanLineAgrees: whatever line scanLine reads, it reads as the
// general decoding (Stamp.Decode) does, blocks included.
func FuzzPERF2_ScanLineAgrees(f *testing.F) {
	for _, l := range []string{
		`{"type":"assistant","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi \n\u00e9"}],"stop_reason":null,"usage":{"input_tokens":1}},"parent_tool_use_id":null,"session_id":"s","uuid":"u","request_id":"r"}`,
		`{"type":"assistant","message":{"content":[]},"parent_tool_use_id":"toolu_1","session_id":"s"}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"a"},{"type":"tool_use","id":"t","name":"Bash","input":{}}]}}`,
		`{"type":"user","message":{"role":"user","content":"plain"}}`,
		`{"type":"assistant","message":"text","Type":"user"}`,
		`{"type":"assistant","message":{"content":null}}`,
		`{"type":"assistant","message":{"content":[{"type":"text","text":"a","TEXT":"b"}]}}`,
		`{"message":{"content":[]}}`,
		`{"type":"result","subtype":"success","result":"x"}`,
	} {
		f.Add([]byte(l))
	}
	st := runner.Stamp{Agent: "claude-code"}
	f.Fuzz(func(t *testing.T, b []byte) {
		var got line
		if !scanLine(b, &got) {
			return
		}
		var want line
		if err := st.Decode(b, &want, &want.Type); err != nil {
			t.Fatalf("scanned %q, Decode: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\n scanned %+v\n decoded %+v", b, got, want)
		}
	})
}

// PERF-2: scanLine takes the assistant text lines of the captures (and
// of scripts/bench's claude shape) and reads them as Stamp.Decode does.
func TestPERF2_ScanLineTakesAssistantText(t *testing.T) {
	taken := 0
	st := runner.Stamp{Agent: "claude-code"}
	for _, c := range uestest.Captures(t) {
		for _, l := range c.Lines(t) {
			var got, want line
			if !scanLine(l, &got) {
				continue
			}
			taken++
			if err := st.Decode(l, &want, &want.Type); err != nil || !reflect.DeepEqual(got, want) {
				t.Errorf("%s:\n scanned %+v\n decoded %+v (%v)", l, got, want, err)
			}
		}
	}
	if taken == 0 {
		t.Error("no captured line taken by the scanner")
	}
}
