package protocol_test

import (
	"slices"
	"testing"

	"github.com/drover-run/drover/internal/testkit/apitest"
	"github.com/drover-run/drover/protocol"
)

// TestAPI1_AddedOpReachesTheProtocol: an operation added to the service's
// table is an op of the JSON-lines protocol, its params the request's
// fields, with nothing written for it here; and it reaches a connection
// confined to a run too, since agents may call it.
func TestAPI1_AddedOpReachesTheProtocol(t *testing.T) {
	f := newFixture(t, protocol.Config{Ops: apitest.Ops()})
	w := f.dial(t)
	var res apitest.EchoResult
	w.call("1", `{"id":1,"op":"echo","say":"hi","times":2}`, &res)
	if !slices.Equal(res.Said, []string{"hi", "hi"}) || res.API == 0 {
		t.Fatalf("echo: %+v", res)
	}
	if code := w.fail("2", `{"id":2,"op":"echo","say":"hi","volume":11}`); code != "INVALID_REQUEST" {
		t.Fatalf("an unknown field: %s", code)
	}
	// Without it in the table, there is no such op.
	plain := newFixture(t, protocol.Config{}).dial(t)
	if code := plain.fail("3", `{"id":3,"op":"echo","say":"hi"}`); code != "INVALID_REQUEST" {
		t.Fatalf("echo on a server without it: %s", code)
	}
}
