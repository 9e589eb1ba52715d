package mcpserver_test

import (
	"context"
	"slices"
	"testing"

	"github.com/drover-run/drover/internal/testkit/apitest"
	"github.com/drover-run/drover/mcpserver"
)

// TestAPI1_AddedOpReachesMCP: an operation added to the service's table
// that agents may call is a tool, named for it, its params the tool's
// arguments and its result the tool's, through the service confined to
// what an agent may do, with nothing written for it in the MCP face.
func TestAPI1_AddedOpReachesMCP(t *testing.T) {
	sup := newLedger(t).supervisor(t, "a:1")
	c := connect(t, sup, mcpserver.Config{Ops: apitest.Ops()})
	tools, err := c.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, tool := range tools.Tools {
		if tool.Name == "echo" {
			found = tool.Description == apitest.Echo.Summary
		}
	}
	if !found {
		t.Fatalf("no echo tool with the op's summary among %d tools", len(tools.Tools))
	}
	res := ok[apitest.EchoResult](c, "echo", map[string]any{"say": "hi", "times": 2})
	if !slices.Equal(res.Said, []string{"hi", "hi"}) || res.API == 0 || !res.Agent {
		t.Fatalf("echo: %+v (want it through the confined service)", res)
	}
	// Without it in the table, there is no such tool.
	plain := connect(t, sup, mcpserver.Config{})
	tools, err = plain.session.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range tools.Tools {
		if tool.Name == "echo" {
			t.Fatal("an echo tool on a server without the op")
		}
	}
}
