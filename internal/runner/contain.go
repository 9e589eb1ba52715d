package runner

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
)

// containAvailable says whether the kernel can contain processes; a
// variable so that tests can play a kernel without Landlock.
var containAvailable = contain.Available

// Done metadata of containment (docs/security.md).
const (
	// MetaContained is true when the vendor process ran contained.
	MetaContained = "contained"
	// MetaContainment says why a run was not contained.
	MetaContainment = "containment"
	// MetaNetwork lists the TCP ports a contained run could connect to,
	// when its Options.Network restricted them.
	MetaNetwork = "networkPorts"
)

// containment is what an attempt does about containing its process: the
// decision, and the run's own TMPDIR when contained.
type containment struct {
	on     bool
	reason string   // why not, when !on
	tmp    string   // the run's TMPDIR, removed by cleanup
	net    bool     // connections restricted to ports
	ports  []uint16 // the ports allowed, when net
}

// decideContainment decides for a vendor with caps, in a run that can be
// answered or steered (live) or not, as the engine does (contain.Decide).
// A contained run gets a TMPDIR of its own, which the caller removes with
// cleanup.
func decideContainment(opts drover.Options, caps drover.Capabilities, live bool) (*containment, error) {
	d, err := contain.Decide(opts, caps, live, containAvailable)
	if err != nil {
		return nil, err
	}
	if !d.On {
		return &containment{reason: d.Reason}, nil
	}
	ports, net, err := opts.NetworkPorts()
	if err != nil {
		return nil, err
	}
	// The CLIs measured keep their temporary files under $TMPDIR, none
	// under a hard-coded /tmp: a directory of the run's own keeps /tmp out
	// of the write boundary and goes with the run.
	tmp, err := os.MkdirTemp("", "drover-run-")
	if err != nil {
		return nil, &drover.Error{Code: drover.CodeAdapterError, Message: "contain: temporary directory", Err: err}
	}
	return &containment{on: true, tmp: tmp, net: net, ports: ports}, nil
}

func (c *containment) cleanup() {
	if c.tmp != "" {
		_ = os.RemoveAll(c.tmp)
	}
}

// env returns env as a contained vendor gets it: with the run's own
// TMPDIR, whatever the vendor's Prepare or Options.Env set.
func (c *containment) env(env []string) []string {
	if !c.on {
		return env
	}
	return append(slices.Clip(env), "TMPDIR="+c.tmp)
}

// policy returns the write boundary of a contained attempt, nil for one
// that is not: the run's directories (Options.WorkDirs), its TMPDIR and
// the vendor's own state (Launch.Writable). Writable directories that do
// not exist yet are created, since creating them would need the parent
// to be writable.
func (c *containment) policy(opts drover.Options, l *Launch, path string) (*contain.Policy, error) {
	if !c.on {
		return nil, nil
	}
	cwd, addDirs := opts.WorkDirs()
	write := append([]string{cwd}, addDirs...)
	write = append(write, c.tmp)
	for _, d := range l.Writable {
		if !filepath.IsAbs(d) {
			return nil, &drover.Error{Code: drover.CodeAdapterError, Message: fmt.Sprintf("contain: writable %q is not absolute", d)}
		}
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, &drover.Error{Code: drover.CodeAdapterError, Message: "contain: create " + d, Err: err}
		}
		write = append(write, d)
	}
	for _, f := range l.WritableFiles {
		if !filepath.IsAbs(f) {
			return nil, &drover.Error{Code: drover.CodeAdapterError, Message: fmt.Sprintf("contain: writable %q is not absolute", f)}
		}
		write = append(write, f)
	}
	pol := &contain.Policy{Write: write, Net: c.net, Connect: c.ports}
	if opts.ContainReads {
		pol.Read = installation(path, Getenv(l.Env, "PATH"))
	}
	return pol, nil
}

// installation is what a vendor run with a read boundary must still read
// besides its write boundary and the system's directories: the programs on
// its PATH (node, git, a toolchain in the home) and the vendor's own
// installation, the outermost node_modules its program lies in (an npm
// CLI's dependencies sit beside it there), else the program's directory.
func installation(path, pathList string) []string {
	var read []string
	for _, d := range filepath.SplitList(pathList) {
		if filepath.IsAbs(d) {
			read = append(read, contain.Resolve(d))
		}
	}
	prog := contain.Resolve(path)
	root := filepath.Dir(prog)
	for d := root; d != filepath.Dir(d); d = filepath.Dir(d) {
		if filepath.Base(d) == "node_modules" {
			root = d
		}
	}
	return append(read, root)
}

// stamp wraps yield so that the done event says whether the run was
// contained, and if not, why; and the ports a restricted network allowed.
func (c *containment) stamp(yield func(drover.Event, error) bool) func(drover.Event, error) bool {
	return func(ev drover.Event, err error) bool {
		if err == nil && ev.Type == drover.TypeDone {
			md := maps.Clone(ev.Metadata)
			if md == nil {
				md = map[string]any{}
			}
			md[MetaContained] = c.on
			if !c.on {
				md[MetaContainment] = c.reason
			}
			if c.net {
				md[MetaNetwork] = slices.Clone(c.ports)
			}
			ev.Metadata = md
		}
		return yield(ev, err)
	}
}

// Getenv returns the value of key in env as a process started with env
// sees it: the last entry wins, as os/exec keeps the last of duplicates.
// A nil env is drover's own environment. A vendor's Prepare uses it to
// find its state directories (Launch.Writable) in the environment it
// built.
func Getenv(env []string, key string) string {
	if env == nil {
		return os.Getenv(key)
	}
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == key {
			return v
		}
	}
	return ""
}
