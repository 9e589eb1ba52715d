// Package contain confines a vendor CLI, and everything it starts, to a
// write boundary (and, when asked, a read boundary) enforced by the kernel
// (BND-2, SEC-2): on Linux with Landlock; elsewhere it is unavailable.
//
// drover's own process is never restricted. A contained process is started
// from this program's own executable (os.Executable) with Var set in its
// environment: the program then acts as a launcher before it does anything
// else — it restricts itself and execs the CLI, never returning — and the
// CLI inherits the restriction, as does every process it starts, for good
// (Landlock cannot be lifted). internal/proc does this for Spec.Contain;
// the hook that makes any program that imports it a launcher is this
// package's init.
package contain

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// Var is the environment variable that makes this program a launcher; its
// value is the encoded Policy and target. The launcher removes it from the
// environment the CLI gets, so a drover the CLI starts is not a launcher.
const Var = "DROVER_CONTAIN"

// ErrUnavailable is wrapped by Available's error when the kernel cannot
// contain processes (not Linux, Landlock missing or disabled at boot).
var ErrUnavailable = errors.New("landlock unavailable")

// devices are the files under /dev every contained process may still write
// (and, with a read boundary, read): the null and random devices, its
// terminal, and new pseudo-terminals (/dev/ptmx and /dev/pts) for the CLIs
// that run shell commands on one. Only writing to them is allowed, not
// creating or removing anything there.
var devices = []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/tty", "/dev/ptmx", "/dev/pts"}

// systemRead are the directories a process with a read boundary may still
// read beneath: programs, libraries, configuration of the system, devices
// and the kernel's views (a read boundary that left these out would let
// nothing run).
var systemRead = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc", "/dev", "/proc", "/sys", "/run", "/opt", "/nix"}

// Policy is what a contained process may do.
type Policy struct {
	// Write are the directories (and files) the process may write beneath:
	// create, change, remove, rename within them. Paths must be absolute;
	// one that does not exist is skipped (nothing can be written there
	// then). The devices (/dev/null, /dev/tty, /dev/ptmx, /dev/pts, …)
	// are always added, for writing to them only.
	Write []string `json:"write"`
	// Read, when not nil, are the only directories (and files) the process
	// may read beneath, besides Write, the system's directories (/usr,
	// /etc, /proc, /dev, …) and the directory of the program it runs.
	// nil: it may read everything.
	Read []string `json:"read"`
	// Net, when set, restricts TCP connections to the ports in Connect
	// (Landlock ABI 4; binding and UDP stay free).
	Net     bool     `json:"net,omitempty"`
	Connect []uint16 `json:"connect,omitempty"`
}

// launch is what Var carries: the policy and the program to exec.
type launch struct {
	Policy
	// Path is the program the launcher execs (argv stays its own).
	Path string `json:"path"`
}

// Command returns how to start path contained by p: the program to start
// instead of path (this program's own executable, the launcher) and the
// environment entry to add (Var). The started process's argv stays the
// one meant for path; the launcher passes it on unchanged, so the CLI sees
// its own argv[0]. It fails if containment is unavailable (see Available),
// a path is not absolute, or this program's executable cannot be found.
func Command(p Policy, path string) (launcher, envEntry string, err error) {
	if err := Available(); err != nil {
		return "", "", err
	}
	for _, d := range slices.Concat(p.Write, p.Read, []string{path}) {
		if !filepath.IsAbs(d) {
			return "", "", fmt.Errorf("contain: %q is not an absolute path", d)
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return "", "", fmt.Errorf("contain: find the launcher: %w", err)
	}
	b, err := json.Marshal(launch{Policy: p, Path: path})
	if err != nil {
		return "", "", fmt.Errorf("contain: %w", err)
	}
	return exe, Var + "=" + string(b), nil
}

// Within reports whether path is dir or lies beneath it. Both are cleaned
// first; neither is resolved (a caller resolves links where they matter).
func Within(path, dir string) bool {
	path, dir = filepath.Clean(path), filepath.Clean(dir)
	if path == dir || dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(path, dir+string(filepath.Separator))
}

// Resolve returns path absolute, cleaned, and with its symbolic links
// resolved as far as it exists: what the kernel compares, since Landlock
// rules hold for the file a path names, not for the name.
func Resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	// Resolve the longest existing prefix; keep the rest as written.
	rest := ""
	for p := abs; ; {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return abs
		}
		rest = filepath.Join(filepath.Base(p), rest)
		p = parent
	}
}

// InRoots reports whether the absolute path is one of roots or lies
// beneath one once its symbolic links are resolved (Resolve): a link
// inside a root to a place outside it is outside, and a file not created
// yet is judged by the directory it would be created in. roots are
// compared as given: resolve each once (Resolve) when setting them. A
// relative path is in none, since which directory it is relative to is
// the caller's to say.
func InRoots(path string, roots []string) bool {
	if !filepath.IsAbs(path) {
		return false
	}
	path = Resolve(path)
	return slices.ContainsFunc(roots, func(root string) bool { return Within(path, root) })
}

// init makes this program a launcher when Var is set (see the package
// doc). An init function, unlike every other in drover, because this is a
// process-entry hook, not a registration: it has to run before any other
// code of whichever program is the launcher — the drover command, a test
// binary, a library user's program — and those have nothing else in
// common than importing internal/proc, which imports this package. With
// Var unset (always, but in a launcher) it does nothing.
func init() {
	v, ok := os.LookupEnv(Var)
	if !ok {
		return
	}
	os.Exit(runLauncher(v))
}

// runLauncher restricts this process as v says and execs the target; it
// returns only on failure, with the exit status to end with. A launcher
// never runs the target uncontained: any failure ends it.
func runLauncher(v string) int {
	var l launch
	if err := json.Unmarshal([]byte(v), &l); err != nil || l.Path == "" {
		fmt.Fprintf(os.Stderr, "drover: contain: bad %s: %v\n", Var, err)
		return 126
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, Var+"=") })
	err := restrictAndExec(l.Policy, l.Path, os.Args, env)
	fmt.Fprintf(os.Stderr, "drover: contain %s: %v\n", l.Path, err)
	return 126
}

// netABI is the first Landlock ABI that restricts TCP connections.
const netABI = 4

// Decision is what a run gets of containment (SEC-2): on, or off and why
// ("off": the run asked for none; "autonomous": the default of that tier;
// "vendor sandbox": the vendor sandboxes its commands itself in the run's
// tier; "landlock unavailable": the kernel cannot).
type Decision struct {
	On     bool
	Reason string
}

// Decide applies Options.Contain for a vendor with caps, in a run that can
// be answered or steered (live) or not, on a kernel whose ability
// available reports (Available, or a test's stand-in): an explicit request
// that cannot be honoured is an UNSUPPORTED_OPTION error; the default goes
// on uncontained where the kernel cannot, and in the tiers where the
// vendor sandboxes its own commands (Capabilities.Contain, ContainLive).
// The engine decides once per run with it and the adapter kit per process,
// so both always agree.
func Decide(opts drover.Options, caps drover.Capabilities, live bool, available func() error) (Decision, error) {
	on, explicit := opts.Containment()
	tier := opts.EffectiveTier()
	switch {
	case !on && explicit:
		return Decision{Reason: "off"}, nil
	case !on:
		return Decision{Reason: string(drover.TierAutonomous)}, nil
	case !caps.Contains(tier, live) && explicit:
		msg := fmt.Sprintf("contain: in tier %s this agent sandboxes its commands itself, which cannot run contained", tier)
		if caps.Contains(tier, true) {
			msg = fmt.Sprintf("contain: in tier %s this agent sandboxes its commands itself when nobody can answer it, which cannot run contained; "+
				"a run that can be answered (a permission callback, an approval timeout or rules) can", tier)
		}
		return Decision{}, &drover.Error{Code: drover.CodeUnsupportedOption, Message: msg}
	case !caps.Contains(tier, live):
		// The vendor's own sandbox holds the boundary.
		return Decision{Reason: "vendor sandbox"}, nil
	}
	if err := available(); err != nil {
		if explicit {
			return Decision{}, &drover.Error{Code: drover.CodeUnsupportedOption, Message: "contain: this system cannot contain processes", Err: err}
		}
		return Decision{Reason: "landlock unavailable"}, nil
	}
	if opts.Network != "" && ABI() < netABI {
		return Decision{}, &drover.Error{Code: drover.CodeUnsupportedOption, Message: fmt.Sprintf(
			"network: this kernel's Landlock (ABI %d) cannot restrict connections (ABI %d and later)", ABI(), netABI)}
	}
	return Decision{On: true}, nil
}
