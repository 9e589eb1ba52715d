package acptest

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Build compiles the scripted agent into a temporary directory of t (see
// BuildIn) and returns the binary's path.
func Build(t testing.TB) string {
	t.Helper()
	bin, err := BuildIn(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// BuildIn compiles the scripted agent (adapter/acp/testdata/fakeagent)
// into dir and returns the binary's path. Run with --version it prints
// Version; otherwise it is Agent, its mode from ModeEnv.
func BuildIn(dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("acptest: cannot locate its own source")
	}
	bin := filepath.Join(dir, "fake-acp")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "..", "testdata", "fakeagent")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the scripted ACP agent: %v\n%s", err, out)
	}
	return bin, nil
}
