// Package acp is drover's client of the Agent Client Protocol (ACP v1:
// JSON-RPC 2.0, one message a line, on the agent's stdin and stdout): a
// generic adapter for any ACP agent added by configuration (New, ACP-1),
// and the conversation the Gemini CLI and OpenCode adapters drive their
// agents' ACP mode with (NewConversation). The ACP ↔ UES mapping, what
// drover serves to an agent and the limits are in docs/adapters/acp.md.
//
// The protocol's types come from github.com/coder/acp-go-sdk; its
// connection does not fit drover's process model (see docs/adapters/acp.md):
// the conversation is a runner.Conversation, driven by the adapter kit's
// one loop over the process's lines.
package acp

// ProtocolVersion is the ACP version drover speaks.
const ProtocolVersion = 1

// clientName and clientVersion are how drover introduces itself in
// initialize.
const (
	clientName    = "drover"
	clientVersion = "dev"
)
