//go:build unix

package private

import (
	"bytes"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestBND3_ModesNeedingRepair: a mode with a bit for group or others, or
// without the owner's read and write (and search, for a directory), is
// repaired; the owner's own extra bits are left.
func TestBND3_ModesNeedingRepair(t *testing.T) {
	for _, c := range []struct {
		perm, want fs.FileMode
		repair     bool
	}{
		{0o600, FileMode, false},
		{0o700, FileMode, false},
		{0o400, FileMode, true},
		{0o000, FileMode, true},
		{0o640, FileMode, true},
		{0o604, FileMode, true},
		{0o666, FileMode, true},
		{0o700, DirMode, false},
		{0o600, DirMode, true},
		{0o755, DirMode, true},
		{0o000, DirMode, true},
	} {
		if got := needsRepair(c.perm, c.want); got != c.repair {
			t.Errorf("needsRepair(%04o, %04o) = %v", c.perm, c.want, got)
		}
	}
}

// TestBND3_KeepRepairsModes: Keep sets a file back to 0600 and a directory
// to 0700, logs a warning naming what it was, and leaves a private one and
// a missing one alone.
func TestBND3_KeepRepairsModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	file := filepath.Join(dir, "drover.db")
	if err := os.Mkdir(dir, DirMode); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(file); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path       string
		mode, want fs.FileMode
	}{
		{file, 0o666, FileMode},
		{file, 0o000, FileMode},
		{dir, 0o777, DirMode},
		{dir, 0o000, DirMode},
	} {
		if err := os.Chmod(c.path, c.mode); err != nil {
			t.Fatal(err)
		}
		var logs bytes.Buffer
		if err := Keep(c.path, "ledger", slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
			t.Fatalf("%s at %04o: %v", c.path, c.mode, err)
		}
		if fi, err := os.Stat(c.path); err != nil || fi.Mode().Perm() != c.want {
			t.Fatalf("%s at %04o: now %v %v, want %04o", c.path, c.mode, fi.Mode().Perm(), err, c.want)
		}
		want := fmt.Sprintf("level=WARN msg=\"ledger mode was %04o, repaired to %04o: something changed it\"", c.mode, c.want)
		if !strings.Contains(logs.String(), want) {
			t.Errorf("log %q lacks %q", logs.String(), want)
		}
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	for _, p := range []string{file, dir, filepath.Join(dir, "missing")} {
		if err := Keep(p, "ledger", log); err != nil {
			t.Fatal(err)
		}
	}
	if logs.Len() != 0 {
		t.Errorf("private or missing paths were repaired: %s", logs.String())
	}
}

// TestBND3_KeepRefusesAnotherUsersFile: a file of drover's state that
// another user owns is an error saying whose it is, and is not touched.
func TestBND3_KeepRefusesAnotherUsersFile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a file to another user")
	}
	file := filepath.Join(t.TempDir(), "drover.db")
	if err := os.WriteFile(file, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(file, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := Keep(file, "ledger", nil)
	if err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("Keep of another user's file: %v", err)
	}
	if fi, _ := os.Stat(file); fi.Mode().Perm() != 0o666 {
		t.Errorf("another user's file was changed: %v", fi.Mode())
	}
}

// TestBND3_CreateFileIgnoresUmask: a file drover creates is 0600 whatever
// the umask, and an existing one is left as it is.
func TestBND3_CreateFileIgnoresUmask(t *testing.T) {
	file := filepath.Join(t.TempDir(), "drover.db")
	defer syscall.Umask(syscall.Umask(0o377))
	if err := CreateFile(file); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != FileMode {
		t.Fatalf("new file: %v %v", fi.Mode(), err)
	}
	if err := os.WriteFile(file, []byte("kept"), 0); err != nil {
		t.Fatal(err)
	}
	if err := CreateFile(file); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(file); string(b) != "kept" {
		t.Fatalf("an existing file was replaced: %q", b)
	}
}
