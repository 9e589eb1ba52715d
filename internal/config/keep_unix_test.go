//go:build unix

package config

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBND3_KeepConfig: Keep sets back the modes of drover's configuration
// directory and of the files drover writes there, warning about each, and
// leaves the user's own files there as they are.
func TestBND3_KeepConfig(t *testing.T) {
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	dir, _ := Dir()
	profiles, _ := ProfilesFile()
	workerID, _ := WorkerIDFile()
	if err := SaveProfiles(profiles, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(workerID, []byte("w\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "my-agent.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, m := range map[string]os.FileMode{dir: 0o755, profiles: 0o644, workerID: 0o000, script: 0o755} {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	var logs bytes.Buffer
	if err := Keep(slog.New(slog.NewTextHandler(&logs, nil))); err != nil {
		t.Fatal(err)
	}
	for p, m := range map[string]os.FileMode{dir: 0o700, profiles: 0o600, workerID: 0o600, script: 0o755} {
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != m {
			t.Errorf("%s: mode %v (%v), want %v", p, st.Mode().Perm(), err, m)
		}
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 3 || strings.Contains(logs.String(), script) {
		t.Errorf("%d warnings, want 3 (none for the user's own file):\n%s", n, logs.String())
	}
}
