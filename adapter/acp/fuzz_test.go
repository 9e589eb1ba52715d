package acp_test

import (
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// session is what an agent says to open a session: initialize's and
// session/new's answers to drover's requests 1 and 2.
var session = []string{
	`{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":1,"agentCapabilities":{"loadSession":true}}}`,
	`{"jsonrpc":"2.0","id":2,"result":{"sessionId":"s1","models":{"currentModelId":"m","availableModels":[]}}}`,
}

// FuzzACPConversation feeds what an agent may send, after it opened a
// session, to a conversation: agent output is untrusted, so nothing may
// panic, and every event, up to the run's end, must be valid UES.
func FuzzACPConversation(f *testing.F) {
	for _, l := range []string{
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_message_chunk","messageId":"a","content":{"type":"text","text":"hi"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hm"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call","toolCallId":"c","title":"ls","kind":"execute","status":"in_progress","rawInput":{"command":"ls"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"tool_call_update","toolCallId":"c","status":"failed","content":[{"type":"diff","path":"/x","newText":"y"},{"type":"content","content":{"type":"text","text":"no"}}],"rawOutput":{"error":"e"}}}}`,
		`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1","update":{"sessionUpdate":"plan","entries":[]}}}`,
		`{"jsonrpc":"2.0","id":0,"method":"session/request_permission","params":{"sessionId":"s1","options":[{"optionId":"o","name":"ok","kind":"allow_once"}],"toolCall":{"toolCallId":"c","title":"rm","kind":"execute"}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"sessionId":"s1","path":"/etc/passwd","line":-3,"limit":-1}}`,
		`{"jsonrpc":"2.0","id":6,"method":"fs/write_text_file","params":{"sessionId":"s1","path":"relative","content":"x"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"terminal/create","params":{}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn","usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}}`,
		`{"jsonrpc":"2.0","id":3,"error":{"code":429,"message":"slow","data":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"stopReason":"nonsense"}}`,
		`{"id":null,"error":{"code":-32700,"message":"parse error"}}`,
		`[1,2,3]`, `{}`, `not json`,
	} {
		f.Add([]byte(l), 0)
		f.Add([]byte(l), 1)
	}
	f.Fuzz(func(t *testing.T, line []byte, code int) {
		for _, tier := range []drover.Tier{drover.TierSupervised, drover.TierDryRun} {
			c := acp.NewConversation(uestest.Stamp("fuzz"), acp.Session{Prompt: "p", Cwd: t.TempDir(), Tier: tier, Live: true},
				acp.Dialect{ReadTextFile: true, WriteTextFile: true})
			if _, err := c.Open(); err != nil {
				t.Fatal(err)
			}
			var evs []drover.Event
			for _, l := range append([]string{session[0], session[1]}, string(line)) {
				out, _ := c.Translate([]byte(l))
				c.Outbox()
				evs = append(evs, out...)
			}
			final, _ := c.Finish(runner.Exit{Code: code})
			for _, ev := range append(evs, final...) {
				if err := drover.ValidateEvent(ev); err != nil {
					t.Fatalf("invalid event from %q: %v", line, err)
				}
			}
		}
	})
}

// TestCTL3_ACPInterruptBeforePrompt: an interrupt that comes while the
// session is starting is taken (recorded), and the turn is cancelled as
// soon as its prompt is sent: session/cancel follows session/prompt.
func TestCTL3_ACPInterruptBeforePrompt(t *testing.T) {
	c := acp.NewConversation(uestest.Stamp("t"), acp.Session{Prompt: "p", Cwd: t.TempDir(), Tier: drover.TierAutonomous, Live: true}, acp.Dialect{})
	if _, err := c.Open(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Translate([]byte(session[0])); err != nil {
		t.Fatal(err)
	}
	c.Outbox()
	if out, err := c.Pass(drover.LiveInput{Interrupt: &drover.InterruptPayload{}}); err != nil || len(out) != 0 {
		t.Fatalf("interrupt while starting: %q, %v; want it taken, nothing written yet", out, err)
	}
	if _, err := c.Translate([]byte(session[1])); err != nil {
		t.Fatal(err)
	}
	out, _ := c.Outbox()
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `"session/prompt"`) || !strings.Contains(lines[1], `"session/cancel"`) {
		t.Fatalf("written %q, want the prompt, then session/cancel", lines)
	}
	if _, err := c.Pass(drover.LiveInput{Interrupt: &drover.InterruptPayload{}}); err != nil {
		t.Fatalf("interrupt while the turn runs: %v", err)
	}
}
