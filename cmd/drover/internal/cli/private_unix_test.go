//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/config"
	"github.com/drover-run/drover/store/sqlite"
)

// TestBND3_TamperedModesRepaired: an agent run by drover changes the modes
// of drover's state — the ledger, its -wal and -shm files, the state
// directory, the config directory and the agents file — to 0666/0777, then
// to 000, which Landlock does not prevent (it restricts writing, not
// chmod). Each time the next drover command works, sets every mode back
// to 0600 or 0700 and warns about each; as root, 000 would not have
// stopped it, so the modes themselves are what prove the check. A ledger
// of another user is refused, saying whose it is.
func TestBND3_TamperedModesRepaired(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("XDG_STATE_HOME", filepath.Join(tmp, "state"))
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(tmp, "config"))
	t.Setenv("DROVER_DB", "") // the default ledger, in drover's state directory
	stateDir := filepath.Join(tmp, "state", "drover")
	db := filepath.Join(stateDir, "drover.db")
	cfgDir := filepath.Join(tmp, "config", "drover")
	agents := filepath.Join(cfgDir, "agents.json")
	if err := config.SaveAgents(agents, nil); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if code, _, errOut, _ := runCLI(t, ctx, "ok", "run", "--json", "-a", "claude", "first"); code != ExitOK {
		t.Fatalf("first run: exit %d: %s", code, errOut)
	}
	// Another drover keeps the ledger open, so that its -wal and -shm
	// files stay between the commands.
	held, err := sqlite.Open(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	private := map[string]fs.FileMode{db: 0o600, db + "-wal": 0o600, db + "-shm": 0o600, stateDir: 0o700, cfgDir: 0o700, agents: 0o600}
	checkModes := func(when string, want func(path string) fs.FileMode) {
		t.Helper()
		for p := range private {
			fi, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != want(p) {
				t.Errorf("%s: %s is %04o, want %04o", when, p, fi.Mode().Perm(), want(p))
			}
		}
	}
	checkModes("as created", func(p string) fs.FileMode { return private[p] })

	for _, c := range []struct{ file, dir fs.FileMode }{{0o666, 0o777}, {0o000, 0o000}} {
		tampered := func(p string) fs.FileMode {
			if private[p] == 0o700 {
				return c.dir
			}
			return c.file
		}
		modes := map[string]fs.FileMode{}
		for p := range private {
			modes[p] = tampered(p)
		}
		data, _ := json.Marshal(modes)
		t.Setenv("FAKE_CHMOD", string(data))
		code, stdout, errOut, _ := runCLI(t, ctx, "chmod", "run", "--json", "-a", "claude", "change drover's modes")
		evs := decodeEvents(t, stdout)
		if code != ExitOK || len(evs) < 2 || evs[1].Payload.(drover.TextPayload).Content != "chmod done" {
			t.Fatalf("the agent's chmod %04o/%04o: exit %d\n%s\n%s", c.file, c.dir, code, stdout, errOut)
		}
		t.Logf("the agent was contained: %v", evs[len(evs)-1].Metadata["contained"])
		when := fmt.Sprintf("after the agent's chmod %04o/%04o", c.file, c.dir)
		checkModes(when, tampered)

		code, out, errOut, _ := runCLI(t, ctx, "ok", "ps", "--log-level", "warn")
		if code != ExitOK || !strings.Contains(out, "completed") {
			t.Fatalf("ps %s: exit %d\n%s\n%s", when, code, out, errOut)
		}
		checkModes("ps "+when, func(p string) fs.FileMode { return private[p] })
		for p, m := range private {
			want := fmt.Sprintf("mode was %04o, repaired to %04o: something changed it\" path=%s\n", tampered(p), m, p)
			if !strings.Contains(errOut, want) {
				t.Errorf("ps %s: no warning %q in:\n%s", when, want, errOut)
			}
		}
	}

	if os.Geteuid() != 0 {
		return
	}
	if err := os.Chown(db, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	code, _, errOut, _ := runCLI(t, ctx, "ok", "ps")
	if code != ExitFailure || !strings.Contains(errOut, "ledger "+db+" belongs to uid 65534") {
		t.Fatalf("ps on another user's ledger: exit %d: %s", code, errOut)
	}
}
