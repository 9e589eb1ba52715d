package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/store/postgres/pgtest"
)

// DIST-1: what the queue and worker commands refuse, before doing
// anything: a SQLite ledger (nothing to share), labels or retries for a
// run not queued, bad labels, an unknown agent, fakemodel on a server that
// runs nothing.
func TestDIST1_QueueUsageErrors(t *testing.T) {
	sqlite := filepath.Join(t.TempDir(), "drover.db")
	pg := pgtest.NewDatabase(t)
	cases := [][]string{
		{"worker", "--db", sqlite, "--agents", "claude"},
		{"worker", "--db", pg, "--agents", "nope"},
		{"worker", "--db", pg, "--agents", "claude", "--labels", "Bad Label"},
		{"worker", "--db", pg, "--agents", "claude", "--labels", "a,b,c,d,e"},
		{"workers", "--db", sqlite},
		{"run", "--db", sqlite, "--queue", "-a", "claude", "x"},
		{"run", "--db", pg, "--labels", "gpu", "-a", "claude", "x"},
		{"run", "--db", pg, "--retries", "1", "-a", "claude", "x"},
		{"serve", "--db", pg, "--queue", "--fakemodel"},
	}
	for _, args := range cases {
		var out, errb bytes.Buffer
		if code := Run(context.Background(), args, strings.NewReader(""), &out, &errb); code != ExitUsage {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		if !strings.Contains(errb.String(), "drover:") {
			t.Errorf("%v: no error message on stderr", args)
		}
	}
}
