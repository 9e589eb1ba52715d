package protocol_test

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
)

// TestBND1_ProtocolChildOutsideParent: a run op whose parent's working
// directory does not contain the child's is refused BOUNDARY_VIOLATION;
// one inside it runs.
func TestBND1_ProtocolChildOutsideParent(t *testing.T) {
	f := newFixture(t, protocol.Config{})
	w := f.dial(t)
	ws, other := t.TempDir(), t.TempDir()
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	var parent runs.Started
	w.call("1", `{"id":1,"op":"run","agent":"hang","prompt":"p","options":{"cwd":`+q(ws)+`}}`, &parent)
	if code := w.fail("2", `{"id":2,"op":"run","agent":"quick","prompt":"1","parent":"`+parent.RunID+`","options":{"cwd":`+q(other)+`}}`); code != api.CodeBoundaryViolation {
		t.Fatalf("child outside its parent: %s", code)
	}
	var child runs.Started
	w.call("3", `{"id":3,"op":"run","agent":"quick","prompt":"1","parent":"`+parent.RunID+`","options":{"cwd":`+q(filepath.Join(ws, "sub"))+`}}`, &child)
	w.call("4", `{"id":4,"op":"cancel","runId":"`+parent.RunID+`"}`, nil)
	w.call("5", `{"id":5,"op":"await","runs":["`+parent.RunID+`","`+child.RunID+`"]}`, nil)
}
