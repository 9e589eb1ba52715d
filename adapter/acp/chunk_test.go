package acp

import (
	"testing"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/drover-run/drover/internal/runner"
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
