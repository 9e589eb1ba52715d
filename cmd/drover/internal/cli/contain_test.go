package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/contain"
)

// TestSEC2_RunContainFlags: drover run contains a supervised run by
// default, --no-contain does not, autonomous is not by default and is
// with --contain; the done event's metadata says which; --contain and
// --no-contain exclude each other.
func TestSEC2_RunContainFlags(t *testing.T) {
	if err := contain.Available(); err != nil {
		t.Skipf("this kernel cannot contain: %v", err)
	}
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	t.Chdir(t.TempDir())
	for _, c := range []struct {
		args      []string
		contained bool
		reason    string
	}{
		{nil, true, ""},
		{[]string{"--no-contain"}, false, "off"},
		{[]string{"--tier", "autonomous"}, false, "autonomous"},
		{[]string{"--tier", "autonomous", "--contain"}, true, ""},
	} {
		args := append(append([]string{"run", "--json", "-a", "claude"}, c.args...), "hi")
		code, stdout, stderr := cli(t, "ok", args...)
		if code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, stderr)
		}
		evs := decodeEvents(t, stdout)
		md := evs[len(evs)-1].Metadata
		if md["contained"] != c.contained || (c.reason != "" && md["containment"] != c.reason) {
			t.Errorf("%v: done metadata %v", c.args, md)
		}
	}
	if code, _, stderr := cli(t, "ok", "run", "--contain", "--no-contain", "-a", "claude", "hi"); code != ExitUsage || !strings.Contains(stderr, "exclude each other") {
		t.Errorf("--contain --no-contain: exit %d: %s", code, stderr)
	}
}

// TestBND3_RunAroundTheLedger: drover run refuses, as a usage
// error naming BOUNDARY_VIOLATION, a run whose workspace contains the
// ledger's directory; a workspace beside it runs.
func TestBND3_RunAroundTheLedger(t *testing.T) {
	root := t.TempDir()
	ws := filepath.Join(root, "ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("DROVER_DB", filepath.Join(root, "state", "drover.db"))
	t.Chdir(ws)
	code, _, stderr := cli(t, "ok", "run", "--cwd", root, "-a", "claude", "hi")
	if code != ExitUsage || !strings.Contains(stderr, "BOUNDARY_VIOLATION") || !strings.Contains(stderr, filepath.Join(root, "state")) {
		t.Fatalf("a workspace around the ledger: exit %d: %s", code, stderr)
	}
	if code, _, stderr := cli(t, "ok", "run", "-a", "claude", "hi"); code != ExitOK {
		t.Fatalf("a workspace beside the ledger: exit %d: %s", code, stderr)
	}
}
