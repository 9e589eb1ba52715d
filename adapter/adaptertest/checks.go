package adaptertest

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// Locator is an adapter that says where its CLI is; every adapter built
// on runner.Base is one.
type Locator interface {
	drover.Adapter
	// Binary returns the CLI's path for opts.
	Binary(opts drover.Options) (string, error)
}

// Locate checks how a finds its CLI (ADP-1, ADP-4): with nothing on PATH and
// binaryEnv unset, Available reports it not installed naming binaryEnv, and
// Run yields exactly one error, AGENT_NOT_INSTALLED, before anything
// starts; binaryEnv overrides PATH, and Options.Binary overrides both. It
// sets PATH and binaryEnv for t, so t must not be parallel.
func Locate(t *testing.T, a Locator, binaryEnv string) {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
	t.Setenv(binaryEnv, "")
	if av := a.Available(context.Background()); av.Installed || !strings.Contains(av.Error, binaryEnv) {
		t.Fatalf("availability %+v", av)
	}
	n := 0
	for ev, err := range a.Run(context.Background(), drover.Request{Prompt: "x"}) {
		n++
		if drover.CodeOf(err, "") != drover.CodeNotInstalled {
			t.Fatalf("Run yielded %+v, err %v; want AGENT_NOT_INSTALLED", ev, err)
		}
	}
	if n != 1 {
		t.Fatalf("Run yielded %d times without the CLI, want once: AGENT_NOT_INSTALLED", n)
	}
	bin := filepath.Join(t.TempDir(), "cli")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(binaryEnv, bin)
	if p, err := a.Binary(drover.Options{}); err != nil || p != bin {
		t.Fatalf("Binary with %s set = %q, %v", binaryEnv, p, err)
	}
	if p, _ := a.Binary(drover.Options{Binary: "/x/cli"}); p != "/x/cli" {
		t.Fatalf("Options.Binary ignored: %q", p)
	}
}

// Pinned checks a against the vendor CLI command pinned in e2e (installed
// by scripts/install-clis): installed, of version, and marked tested
// (ADP-4). It skips when the pinned CLI is not installed (fails under
// DROVER_E2E=1, as scripts/test installs it), and sets binaryEnv for t.
func Pinned(t *testing.T, a drover.Adapter, binaryEnv, command, version string) {
	t.Helper()
	bin := filepath.Join(moduleRoot(t), "e2e", "node_modules", ".bin", command)
	if _, err := os.Stat(bin); err != nil {
		if os.Getenv("DROVER_E2E") == "1" {
			t.Fatalf("pinned %s not installed (scripts/install-clis; DROVER_E2E=1: not skipped)", command)
		}
		t.Skipf("pinned %s not installed (scripts/install-clis)", command)
	}
	t.Setenv(binaryEnv, bin)
	if av := a.Available(context.Background()); !av.Installed || av.Version != version || !av.Tested {
		t.Fatalf("availability %+v, want version %s tested", av, version)
	}
}

// moduleRoot is the directory of drover's go.mod, above the test's own.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for !exists(filepath.Join(dir, "go.mod")) {
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
	return dir
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// Seed is a file a run's own config home is seeded with from the user's
// own configuration (ADP-7).
type Seed struct {
	// User is its path under the user's configuration directory.
	User string
	// Home is its path under the run's home.
	Home string
}

// Seeding checks how a run's own config home is seeded (ADP-7): seed(home,
// true) copies every file of files from user, the directory the vendor
// finds the user's configuration in (the caller points it there), into
// home, and leaves a file home already has as it is; seed(home, false), a
// run that brings its own credentials, copies none. It returns the seeded
// home for the vendor's own checks.
func Seeding(t *testing.T, user string, files []Seed, seed func(home string, login bool) error) string {
	t.Helper()
	for _, f := range files {
		p := filepath.Join(user, f.User)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("user's "+f.User), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	home := filepath.Join(t.TempDir(), "run-home")
	if err := seed(home, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if data, _ := os.ReadFile(filepath.Join(home, f.Home)); string(data) != "user's "+f.User {
			t.Fatalf("%s not seeded: %q", f.Home, data)
		}
		if err := os.WriteFile(filepath.Join(home, f.Home), []byte("own"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := seed(home, true); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if data, _ := os.ReadFile(filepath.Join(home, f.Home)); string(data) != "own" {
			t.Fatalf("seeding overwrote the run home's own %s", f.Home)
		}
	}
	other := filepath.Join(t.TempDir(), "offline")
	if err := seed(other, false); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if exists(filepath.Join(other, f.Home)) {
			t.Fatalf("%s copied although the run brings its own credentials", f.Home)
		}
	}
	return home
}

// Refused checks that a refuses the options of every case before its CLI
// starts (ADP-3): the run yields exactly one error, UNSUPPORTED_OPTION, and
// the fake CLI put in Options.Binary is never run. It returns each case's
// error, for checks of its message.
func Refused(t *testing.T, a drover.Adapter, cases map[string]drover.Options) map[string]error {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "cli")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\ntouch \"$0.ran\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := map[string]error{}
	for name, o := range cases {
		o.Binary = bin
		var errs []error
		for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x", Options: o}) {
			errs = append(errs, err)
		}
		if len(errs) != 1 || drover.CodeOf(errs[0], "") != drover.CodeUnsupportedOption {
			t.Errorf("%s: %v, want one UNSUPPORTED_OPTION error", name, errs)
			continue
		}
		got[name] = errs[0]
	}
	if exists(bin + ".ran") {
		t.Fatal("the CLI was started for a refused option")
	}
	return got
}
