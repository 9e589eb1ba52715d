package cli

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// LED-6: --db postgres://… (and DROVER_DB) records runs in PostgreSQL and
// every command reads them back from there; a database without drover's
// schema is "no ledger yet" for the commands that list, and has no run
// for those that name one.
func TestLED6_PostgresLedgerThroughCLI(t *testing.T) {
	db := pgtest.NewDatabase(t)
	// Not the SQLite file TestMain points DROVER_DB at.
	t.Setenv("DROVER_DB", filepath.Join(t.TempDir(), "unused.db"))

	code, _, stderr := cli(t, "ok", "ps", "--db", db)
	if code == ExitOK || !strings.Contains(stderr, "no drover schema yet") {
		t.Fatalf("ps on an empty database: %d %q", code, stderr)
	}
	code, _, stderr = cli(t, "ok", "show", "--db", db, "run_0000")
	if code != ExitUsage || !strings.Contains(stderr, `no run "run_0000"`) {
		t.Fatalf("show on an empty database: %d %q", code, stderr)
	}
	if code, _, stderr = cli(t, "ok", "logs", "--db", db, "run_0000"); code != ExitUsage || !strings.Contains(stderr, `no run "run_0000"`) {
		t.Fatalf("logs on an empty database: %d %q", code, stderr)
	}

	code, stdout, stderr := cli(t, "env", "run", "--json", "--db", db, "-a", "claude", "say hello")
	evs := decodeEvents(t, stdout)
	if code != ExitOK || len(evs) == 0 {
		t.Fatalf("run: %d %s", code, stderr)
	}
	id := evs[0].RunID
	// The ledger's URL is drover's alone (SEC-5): an agent that had it
	// could rewrite its own record, whatever its containment.
	if !strings.Contains(stdout, `\"db\":\"\"`) || strings.Contains(stdout, db) {
		t.Errorf("the agent was given the ledger's URL %s:\n%s", db, stdout)
	}

	// What the CLI shows comes from PostgreSQL: the same run, read with
	// the store itself.
	st, err := postgres.Open(t.Context(), db, postgres.ExistingOnly())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := st.GetRun(t.Context(), id)
	if err != nil || r.Status != store.StatusCompleted || r.LastSeq != int64(len(evs)) {
		t.Fatalf("run in PostgreSQL: %+v %v (printed %d events)", r, err, len(evs))
	}

	if code, logs, stderr := cli(t, "ok", "logs", "--json", "--db", db, id); code != ExitOK || logs != stdout {
		t.Fatalf("logs: %d %s\n%s\nvs what run printed\n%s", code, stderr, logs, stdout)
	}
	t.Setenv("DROVER_DB", db) // the variable works as the flag does
	code, psOut, stderr := cli(t, "ok", "ps", "--json")
	var listed store.Run
	if code != ExitOK || json.Unmarshal([]byte(psOut), &listed) != nil || listed.ID != id || listed.Status != store.StatusCompleted {
		t.Fatalf("ps: %d %s %s", code, psOut, stderr)
	}
	code, show, stderr := cli(t, "ok", "show", id)
	if code != ExitOK {
		t.Fatalf("show: exit %d: %s\n%s", code, stderr, show)
	}
	for _, want := range []string{"status    completed", "3 in / 2 out tokens", "[user] say hello", "[assistant] "} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q:\n%s", want, show)
		}
	}
	if code, out, _ := cli(t, "ok", "wait", id); code != ExitOK || !strings.Contains(out, id+" completed") {
		t.Fatalf("wait: %d %q", code, out)
	}
}

// --db picks the backend by its scheme; a ledger that cannot be reached
// says what to check, without the password.
func TestLED6_DBSchemes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "drover.db")
	fileURL := (&url.URL{Scheme: "file", Path: path}).String()
	if code, _, stderr := cli(t, "ok", "run", "--db", fileURL, "-a", "claude", "hi"); code != ExitOK {
		t.Fatalf("run --db %s: %d %s", fileURL, code, stderr)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("--db %s made no SQLite file at %s: %v", fileURL, path, err)
	}
	if code, out, stderr := cli(t, "ok", "ps", "--db", path); code != ExitOK || !strings.Contains(out, "completed") {
		t.Fatalf("ps --db %s: %d %s %s", path, code, out, stderr)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Sprintf("postgresql://drover:pw-s3cr3t@%s/ledger", l.Addr())
	l.Close()
	for _, args := range [][]string{{"ps"}, {"run", "-a", "claude", "hi"}} {
		code, _, stderr := cli(t, "ok", append(args, "--db", refused)...)
		if code == ExitOK || !strings.Contains(stderr, "is the server running there?") || strings.Contains(stderr, "pw-s3cr3t") {
			t.Errorf("%s --db %s: %d %q", args[0], refused, code, stderr)
		}
	}
}
