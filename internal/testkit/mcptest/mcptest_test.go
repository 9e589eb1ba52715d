package mcptest

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// call connects a client over transport, lists the tools, calls Tool with
// key and returns the answer's text.
func call(t *testing.T, transport mcp.Transport, key string) string {
	t.Helper()
	ctx := context.Background()
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	s, err := c.Connect(ctx, transport, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tools, err := s.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools.Tools) != 1 || tools.Tools[0].Name != Tool {
		t.Fatalf("tools %+v, want only %s", tools.Tools, Tool)
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: Tool, Arguments: map[string]any{"key": key}})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			out = append(out, tc.Text)
		}
	}
	return strings.Join(out, "")
}

func TestServerOverEveryTransport(t *testing.T) {
	log := filepath.Join(t.TempDir(), "calls.jsonl")
	h := Serve(t, log)
	bin := Build(t)
	cmd := exec.Command(bin)
	cmd.Env = append(cmd.Environ(), LogEnv+"="+log)
	cases := []struct {
		transport string
		tr        mcp.Transport
	}{
		{"http", &mcp.StreamableClientTransport{Endpoint: h.URL}},
		{"sse", &mcp.SSEClientTransport{Endpoint: h.SSEURL}},
		{"stdio", &mcp.CommandTransport{Command: cmd}},
	}
	for _, c := range cases {
		if got := call(t, c.tr, "k-"+c.transport); got != Answer("k-"+c.transport) {
			t.Errorf("%s: answer %q", c.transport, got)
		}
	}
	calls := Calls(t, log)
	if len(calls) != len(cases) {
		t.Fatalf("calls %+v", calls)
	}
	for i, c := range cases {
		if want := (Call{Transport: c.transport, Tool: Tool, Key: "k-" + c.transport, Answer: Answer("k-" + c.transport)}); calls[i] != want {
			t.Errorf("call %d: %+v, want %+v", i, calls[i], want)
		}
	}
	if len(h.Requests()) == 0 {
		t.Error("no HTTP request recorded")
	}
}
