package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/drover-run/drover/internal/testkit/apitest"
)

// TestAPI1_AddedOpReachesTheCLI: an operation added to the service's
// table is a command of `drover api`, a flag for each of its params'
// fields, its result printed as JSON, with nothing written for it in the
// CLI.
func TestAPI1_AddedOpReachesTheCLI(t *testing.T) {
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "drover.db"))
	run := func(ops bool, args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		e := &env{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, log: slog.New(slog.DiscardHandler)}
		if ops {
			e.ops = apitest.Ops()
		}
		return e.run(context.Background(), args), out.String(), errb.String()
	}
	code, out, stderr := run(true, "api", "echo", "--say", "hi", "--times", "2")
	var res apitest.EchoResult
	if code != ExitOK || json.Unmarshal([]byte(out), &res) != nil || !slices.Equal(res.Said, []string{"hi", "hi"}) || res.API == 0 {
		t.Fatalf("drover api echo: exit %d, %q, %q", code, out, stderr)
	}
	if code, out, _ := run(true, "api"); code != ExitOK || !strings.Contains(out, "echo") || !strings.Contains(out, apitest.Echo.Summary) {
		t.Fatalf("drover api lists: exit %d %q", code, out)
	}
	if code, _, _ := run(true, "api", "echo", "--volume", "11"); code != ExitUsage {
		t.Fatalf("an unknown flag: exit %d", code)
	}
	if code, _, _ := run(false, "api", "echo", "--say", "hi"); code != ExitUsage {
		t.Fatalf("drover api echo without the op: exit %d", code)
	}
}
