package claude

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/uestest"
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
