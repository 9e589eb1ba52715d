package adaptertest

import (
	"context"
	"os"
	"path/filepath"
	"slices"
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
// Run fails with AGENT_NOT_INSTALLED before anything starts; binaryEnv
// overrides PATH, and Options.Binary overrides both. It sets PATH and
// binaryEnv for t, so t must not be parallel.
func Locate(t *testing.T, a Locator, binaryEnv string) {
	t.Helper()
	t.Setenv("PATH", t.TempDir())
	t.Setenv(binaryEnv, "")
	if av := a.Available(context.Background()); av.Installed || !strings.Contains(av.Error, binaryEnv) {
		t.Fatalf("availability %+v", av)
	}
	for _, err := range a.Run(context.Background(), drover.Request{Prompt: "x"}) {
		if drover.CodeOf(err, "") != drover.CodeNotInstalled {
			t.Fatalf("err %v, want AGENT_NOT_INSTALLED", err)
		}
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
// (ADP-4). It skips when the pinned CLI is not installed, and sets
// binaryEnv for t.
func Pinned(t *testing.T, a drover.Adapter, binaryEnv, command, version string) {
	t.Helper()
	bin := filepath.Join(moduleRoot(t), "e2e", "node_modules", ".bin", command)
	if _, err := os.Stat(bin); err != nil {
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

// FlagCase is one row of a vendor's options → command-line table (ADP-3).
type FlagCase struct {
	Name    string
	Options drover.Options
	// Arg is the vendor's second argument to its Args, if it takes one
	// (Gemini's policy path, OpenCode's prompt).
	Arg string
	// Want is the command line, arguments joined by spaces.
	Want string
}

// Flags checks args against every case, comparing CommandLine of its
// result with Want.
func Flags(t *testing.T, args func(o drover.Options, arg string) ([]string, error), cases []FlagCase) {
	t.Helper()
	for _, c := range cases {
		got, err := args(c.Options, c.Arg)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if s := CommandLine(got); s != c.Want {
			t.Errorf("%s:\n got %s\nwant %s", c.Name, s, c.Want)
		}
	}
}

// CommandLine joins args with spaces, showing an empty argument as "".
func CommandLine(args []string) string {
	shown := slices.Clone(args)
	for i, a := range shown {
		if a == "" {
			shown[i] = `""`
		}
	}
	return strings.Join(shown, " ")
}
