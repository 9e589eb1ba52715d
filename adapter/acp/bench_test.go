package acp

import (
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// newBenchConversation is a conversation whose session has started.
func newBenchConversation(b *testing.B) *Conversation {
	b.Helper()
	c := NewConversation(uestest.Stamp("bench"), Session{Prompt: "p", Cwd: b.TempDir(), Tier: drover.TierAutonomous}, Dialect{})
	if _, err := c.Open(); err != nil {
		b.Fatal(err)
	}
	for _, l := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`,
		`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1"}}`,
	} {
		if _, err := c.Translate([]byte(l)); err != nil {
			b.Fatal(err)
		}
		c.Outbox()
	}
	return c
}

// BenchmarkTranslateMessageChunk measures the line a streamed turn is made
// of (and scripts/bench's gemini shape): a text chunk of the agent's
// message, read by the fast path.
func BenchmarkTranslateMessageChunk(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"` +
		strings.Repeat("The quick brown fox jumps over the lazy dog; ", 3) + `"}}}}`)
	c := newBenchConversation(b)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Translate(line); err != nil {
			b.Fatal(err)
		}
		if c.text.Len() > 1<<20 {
			c.text.Reset() // the message would otherwise grow without end
		}
	}
}

// BenchmarkTranslateToolCallUpdate measures a line the general decoding
// reads: a tool call's progress.
func BenchmarkTranslateToolCallUpdate(b *testing.B) {
	line := []byte(`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update",` +
		`"toolCallId":"call-1","status":"in_progress","rawInput":{"command":"go test ./...","description":"run the tests"},` +
		`"content":[{"type":"content","content":{"type":"text","text":"ok  \tgithub.com/drover-run/drover\t1.2s"}}]}}}`)
	c := newBenchConversation(b)
	b.SetBytes(int64(len(line)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Translate(line); err != nil {
			b.Fatal(err)
		}
	}
}
