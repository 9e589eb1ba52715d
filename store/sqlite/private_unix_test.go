//go:build unix

package sqlite_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/drover-run/drover/store/sqlite"
)

// TestBND3_LedgerFilesArePrivate: a new ledger's file and its -wal and
// -shm files are 0600; a mode something changed while another Store kept
// them open (0666, 000: a contained agent can chmod what it cannot write)
// is set back by the next Open, with a warning for each file.
func TestBND3_LedgerFilesArePrivate(t *testing.T) {
	held, path := openTemp(t) // keeps the -wal and -shm files in place
	createRuns(t, held, "r")
	files := []string{path, path + "-wal", path + "-shm"}
	modes := func() string {
		var s []string
		for _, f := range files {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			s = append(s, fmt.Sprintf("%04o", fi.Mode().Perm()))
		}
		return strings.Join(s, " ")
	}
	if got := modes(); got != "0600 0600 0600" {
		t.Fatalf("a new ledger's files: %s, want 0600", got)
	}
	for _, tampered := range []fs.FileMode{0o666, 0o000} {
		for _, f := range files {
			if err := os.Chmod(f, tampered); err != nil {
				t.Fatal(err)
			}
		}
		var logs bytes.Buffer
		s := openPath(t, path, sqlite.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
		checkRun(t, s, "r", 0)
		if got := modes(); got != "0600 0600 0600" {
			t.Fatalf("after %04o: %s, want 0600", tampered, got)
		}
		want := fmt.Sprintf("ledger mode was %04o, repaired to 0600: something changed it", tampered)
		if n := strings.Count(logs.String(), want); n != len(files) {
			t.Errorf("after %04o: %d warnings %q, want %d:\n%s", tampered, n, want, len(files), logs.String())
		}
		s.Close()
	}
}
