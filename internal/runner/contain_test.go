//go:build linux

package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/contain"
)

// writeRun runs the "write" fake with opts (Cwd set to a new workspace),
// asking it to write one file in the workspace, one in a directory
// outside it and one in extra (the vendor's own state, Launch.Writable,
// when not ""). It returns how each write went (by "in", "out",
// "state"), the TMPDIR the fake saw, and the run's events.
func writeRun(t *testing.T, opts drover.Options, extra string) (map[string]string, string, []drover.Event) {
	t.Helper()
	ws, out := t.TempDir(), t.TempDir()
	files := map[string]string{"in": filepath.Join(ws, "in"), "out": filepath.Join(out, "out")}
	paths := []string{files["in"], files["out"]}
	if extra != "" {
		files["state"] = filepath.Join(extra, "state")
		paths = append(paths, files["state"])
	}
	arg := strings.Join(paths, "|")
	hooks := &convHooks{mode: "write", launch: func(l *Launch) {
		l.Env = append(l.Env, fakeArgEnv+"="+arg)
		if extra != "" {
			l.Writable = []string{extra}
		}
	}}
	opts.Cwd = ws
	evs, _ := converseWith(t, hooks, 0, opts, engine.Hooks{}, nil)
	said := texts(evs)
	if len(said) != 1 {
		t.Fatalf("the fake said %q: %v", said, types(evs))
	}
	var res map[string]string
	if err := json.Unmarshal([]byte(said[0]), &res); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for k, f := range files {
		got[k] = res[f]
		if _, err := os.Stat(f); (err == nil) != (res[f] == "ok") {
			t.Errorf("%s: the fake says %q, the file: %v", k, res[f], err)
		}
	}
	return got, res["TMPDIR"], evs
}

func needLandlock(t *testing.T) {
	t.Helper()
	if err := contain.Available(); err != nil {
		t.Skipf("this kernel cannot contain: %v", err)
	}
}

func doneMeta(t *testing.T, evs []drover.Event) map[string]any {
	t.Helper()
	last := evs[len(evs)-1]
	if last.Type != drover.TypeDone {
		t.Fatalf("last event %s", last.Type)
	}
	return last.Metadata
}

func ptr[T any](v T) *T { return &v }

// TestSEC2_ContainedByDefault: a run below autonomous is contained: its
// vendor writes in its workspace and in its own state directory (created
// for it), not elsewhere (EACCES); its TMPDIR is a new directory of the
// run's own, gone after the run; done says contained: true.
func TestSEC2_ContainedByDefault(t *testing.T) {
	needLandlock(t)
	state := filepath.Join(t.TempDir(), "vendor-home") // missing: created for the run
	for _, tier := range []drover.Tier{"", drover.TierSupervised, drover.TierDryRun, drover.TierSandbox} {
		got, tmp, evs := writeRun(t, drover.Options{Tier: tier}, state)
		if got["in"] != "ok" || got["state"] != "ok" || !strings.Contains(got["out"], "permission denied") {
			t.Errorf("tier %q: writes %v", tier, got)
		}
		if md := doneMeta(t, evs); md["contained"] != true || md["containment"] != nil {
			t.Errorf("tier %q: done metadata %v", tier, md)
		}
		if !strings.HasPrefix(filepath.Base(tmp), "drover-run-") || tmp == os.TempDir() {
			t.Errorf("tier %q: TMPDIR %q is not the run's own", tier, tmp)
		}
		if _, err := os.Stat(tmp); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("tier %q: the run's TMPDIR %s is left: %v", tier, tmp, err)
		}
	}
}

// TestSEC2_ContainOption: autonomous is not contained by default (done
// says why), Contain true contains it, Contain false leaves any tier
// uncontained.
func TestSEC2_ContainOption(t *testing.T) {
	needLandlock(t)
	for _, c := range []struct {
		opts      drover.Options
		contained bool
		reason    string
	}{
		{drover.Options{Tier: drover.TierAutonomous}, false, "autonomous"},
		{drover.Options{Tier: drover.TierAutonomous, Contain: ptr(true)}, true, ""},
		{drover.Options{Tier: drover.TierSupervised, Contain: ptr(false)}, false, "off"},
	} {
		name := fmt.Sprintf("%s contain=%v", c.opts.Tier, c.opts.Contain != nil && *c.opts.Contain)
		got, tmp, evs := writeRun(t, c.opts, "")
		if c.contained != strings.Contains(got["out"], "permission denied") || got["in"] != "ok" {
			t.Errorf("%s: writes %v", name, got)
		}
		md := doneMeta(t, evs)
		if md["contained"] != c.contained || (c.reason != "" && md["containment"] != c.reason) {
			t.Errorf("%s: done metadata %v", name, md)
		}
		if !c.contained && tmp != os.Getenv("TMPDIR") {
			t.Errorf("%s: TMPDIR %q changed uncontained", name, tmp)
		}
	}
}

// TestSEC2_NoLandlock: on a kernel that cannot contain, a run that asks
// for containment is refused before its vendor starts
// (UNSUPPORTED_OPTION); one that only has it by default runs
// uncontained and done says why.
func TestSEC2_NoLandlock(t *testing.T) {
	saved := containAvailable
	containAvailable = func() error { return fmt.Errorf("%w: test kernel", contain.ErrUnavailable) }
	t.Cleanup(func() { containAvailable = saved })

	ws := t.TempDir()
	mark := filepath.Join(ws, "ran")
	hooks := &convHooks{mode: "write", launch: func(l *Launch) { l.Env = append(l.Env, fakeArgEnv+"="+mark) }}
	evs, pid := converseWith(t, hooks, 0, drover.Options{Cwd: ws, Contain: ptr(true)}, engine.Hooks{}, nil)
	if pid != 0 || len(evs) != 2 || evs[0].Type != drover.TypeError {
		t.Fatalf("a refused run started its vendor (pid %d): %v", pid, types(evs))
	}
	if p, _ := evs[0].Payload.(drover.ErrorPayload); p.Code != drover.CodeUnsupportedOption || !strings.Contains(p.Message, "landlock unavailable") {
		t.Errorf("error %+v", p)
	}
	if _, err := os.Stat(mark); err == nil {
		t.Error("the vendor ran")
	}

	got, _, evs := writeRun(t, drover.Options{}, "")
	if got["out"] != "ok" {
		t.Errorf("writes %v", got)
	}
	if md := doneMeta(t, evs); md["contained"] != false || md["containment"] != "landlock unavailable" {
		t.Errorf("done metadata %v", md)
	}
}

func TestGetenv(t *testing.T) {
	env := []string{"A=1", "B=x=y", "A=2", "C"}
	for k, want := range map[string]string{"A": "2", "B": "x=y", "C": "", "D": ""} {
		if got := Getenv(env, k); got != want {
			t.Errorf("Getenv(%s) = %q, want %q", k, got, want)
		}
	}
	t.Setenv("DROVER_TEST_GETENV", "own")
	if Getenv(nil, "DROVER_TEST_GETENV") != "own" {
		t.Error("a nil env is not drover's own")
	}
}

// selfSandboxed is the fake of a vendor that sandboxes its own commands
// below autonomous (Capabilities.Contain), as Codex does.
type selfSandboxed struct{ *convHooks }

func (h selfSandboxed) Capabilities() drover.Capabilities {
	c := h.convHooks.Capabilities()
	c.Contain = []drover.Tier{drover.TierAutonomous}
	return c
}

// TestSEC2_VendorSandbox: a vendor that sandboxes its own commands below
// autonomous is not contained there by default (done says "vendor
// sandbox"), asking for it is refused before it starts, and in autonomous
// it is contained when asked.
func TestSEC2_VendorSandbox(t *testing.T) {
	needLandlock(t)
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "out")
	hooks := func() selfSandboxed {
		return selfSandboxed{&convHooks{mode: "write", launch: func(l *Launch) { l.Env = append(l.Env, fakeArgEnv+"="+out) }}}
	}
	evs, _ := converseWith(t, hooks(), 0, drover.Options{Cwd: ws}, engine.Hooks{}, nil)
	if md := doneMeta(t, evs); md["contained"] != false || md["containment"] != "vendor sandbox" {
		t.Errorf("default: done metadata %v", md)
	}
	evs, pid := converseWith(t, hooks(), 0, drover.Options{Cwd: ws, Contain: ptr(true)}, engine.Hooks{}, nil)
	if p, _ := evs[0].Payload.(drover.ErrorPayload); pid != 0 || p.Code != drover.CodeUnsupportedOption {
		t.Errorf("asked in supervised: pid %d, %v %+v", pid, types(evs), p)
	}
	os.Remove(out)
	evs, _ = converseWith(t, hooks(), 0, drover.Options{Cwd: ws, Tier: drover.TierAutonomous, Contain: ptr(true)}, engine.Hooks{}, nil)
	if md := doneMeta(t, evs); md["contained"] != true {
		t.Errorf("autonomous: done metadata %v", md)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("contained in autonomous, the vendor wrote outside: %v", err)
	}
}

// liveOnly is the fake of a vendor that sandboxes its own commands in
// supervised only when it runs headless (Capabilities.ContainLive), as
// Codex does; saw collects the Options.Contain each Prepare got.
type liveOnly struct {
	*convHooks
	saw *[]bool
}

func (h liveOnly) Capabilities() drover.Capabilities {
	c := h.convHooks.Capabilities()
	c.Contain, c.ContainLive = []drover.Tier{drover.TierAutonomous}, []drover.Tier{drover.TierSupervised}
	return c
}

func (h liveOnly) Prepare(req drover.Request) (*Launch, error) {
	*h.saw = append(*h.saw, req.Options.Contain != nil && *req.Options.Contain)
	return h.convHooks.Prepare(req)
}

// TestSEC2_ContainedOnlyLive: a vendor that sandboxes its own commands
// only headless is contained in a run that can be answered or steered (its
// write outside the workspace fails), goes on in its own sandbox headless
// (done says "vendor sandbox"), and is refused containment asked for
// headless; its Prepare sees the decision as Options.Contain.
func TestSEC2_ContainedOnlyLive(t *testing.T) {
	needLandlock(t)
	ws := t.TempDir()
	out := filepath.Join(t.TempDir(), "out")
	var saw []bool
	hooks := func() liveOnly {
		return liveOnly{&convHooks{mode: "write", launch: func(l *Launch) { l.Env = append(l.Env, fakeArgEnv+"="+out) }}, &saw}
	}
	evs, _ := converseWith(t, hooks(), 0, drover.Options{Cwd: ws}, engine.Hooks{Control: engine.NewControl()}, nil)
	if md := doneMeta(t, evs); md["contained"] != true {
		t.Errorf("live: done metadata %v", md)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("contained live, the vendor wrote outside: %v", err)
	}
	evs, _ = converseWith(t, hooks(), 0, drover.Options{Cwd: ws}, engine.Hooks{}, nil)
	if md := doneMeta(t, evs); md["contained"] != false || md["containment"] != "vendor sandbox" {
		t.Errorf("headless: done metadata %v", md)
	}
	evs, pid := converseWith(t, hooks(), 0, drover.Options{Cwd: ws, Contain: ptr(true)}, engine.Hooks{}, nil)
	if p, _ := evs[0].Payload.(drover.ErrorPayload); pid != 0 || p.Code != drover.CodeUnsupportedOption {
		t.Errorf("asked headless: pid %d, %v %+v", pid, types(evs), p)
	}
	if fmt.Sprint(saw) != "[true false]" {
		t.Errorf("Prepare saw Options.Contain %v, want [true false]", saw)
	}
}
