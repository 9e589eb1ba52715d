package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// LookPath finds a vendor binary. If envVar is non-empty and names a
// non-empty environment variable, its value is the binary's path: it must
// exist and be an executable file, and is returned made absolute (a relative
// value is resolved against the current directory, not PATH). Otherwise name
// is searched on PATH with exec.LookPath; a match relative to the current
// directory is rejected as exec.LookPath does. Errors say what to do next,
// naming envVar when one was given.
func LookPath(name, envVar string) (string, error) {
	if envVar != "" {
		if v := os.Getenv(envVar); v != "" {
			fix := fmt.Sprintf("(point %s at the %s executable, or unset it to search PATH)", envVar, name)
			fi, err := os.Stat(v)
			if err != nil {
				return "", fmt.Errorf("%s=%s: %w %s", envVar, v, err, fix)
			}
			if fi.IsDir() {
				return "", fmt.Errorf("%s=%s: is a directory %s", envVar, v, fix)
			}
			if runtime.GOOS != "windows" && fi.Mode().Perm()&0o111 == 0 {
				return "", fmt.Errorf("%s=%s: not executable %s", envVar, v, fix)
			}
			abs, err := filepath.Abs(v)
			if err != nil {
				return "", fmt.Errorf("%s=%s: %w", envVar, v, err)
			}
			return abs, nil
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		hint := "install it"
		if envVar != "" {
			hint += ", or set " + envVar + " to its path"
		}
		if errors.Is(err, exec.ErrDot) {
			return "", fmt.Errorf("%s found only relative to the current directory (%s): %w", name, hint, err)
		}
		return "", fmt.Errorf("%s not found on PATH (%s): %w", name, hint, err)
	}
	return p, nil
}
