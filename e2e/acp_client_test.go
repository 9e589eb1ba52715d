package e2e

// Gemini CLI and OpenCode driven over ACP (ACP-1, PERM-2): the pinned
// gemini 0.61.0 (`gemini --acp`) and opencode 1.18.33 (`opencode acp`),
// each run given a drover.Control so that it is live, offline against
// fakemodel: the conformance suite, and a write approved and one denied
// through the Control.

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/internal/uestest"
)

// acpVendor is one vendor CLI driven over ACP.
type acpVendor struct {
	id, command, binaryEnv, unknownResume string
	adapter                               drover.Adapter
}

var acpVendors = []acpVendor{
	{id: gemini.ID, command: "gemini", binaryEnv: gemini.BinaryEnv, unknownResume: "99999999-2222-4333-8444-555555555555", adapter: gemini.New()},
	{id: opencode.ID, command: "opencode", binaryEnv: opencode.BinaryEnv, unknownResume: "ses_0000000000000000000000unknown", adapter: opencode.New()},
}

// liveRun makes a run live: a Control of its own, so that the engine hands
// the adapter a Live and it drives its CLI's ACP mode.
func liveRun(o *drover.Options) { o.Control = drover.NewControl() }

// TestACP1_ConformanceOverACP runs the conformance suite against each
// vendor driven over ACP.
func TestACP1_ConformanceOverACP(t *testing.T) {
	for _, v := range acpVendors {
		t.Run(v.id, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Harness{Adapter: v.adapter, Binary: vendorBin(t, v.command, v.binaryEnv),
				UnknownResume: v.unknownResume, Configure: liveRun})
		})
	}
}

// acpWorld is one live test's offline setup for a vendor: fakemodel with
// liveScript, a workspace, a home.
type acpWorld struct {
	t    *testing.T
	v    acpVendor
	bin  string
	fake *fakemodel.Server
	url  string
	cwd  string
	home string
}

func newACPWorld(t *testing.T, v acpVendor) *acpWorld {
	t.Helper()
	bin := vendorBin(t, v.command, v.binaryEnv)
	s, err := fakemodel.ParseScript([]byte(liveScript))
	if err != nil {
		t.Fatal(err)
	}
	fm := fakemodel.New(s)
	url, err := fm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Close() })
	return &acpWorld{t: t, v: v, bin: bin, fake: fm, url: url, cwd: t.TempDir(), home: t.TempDir()}
}

// opts are a supervised live run's options: offline, isolated, no API
// retries, a Control, and requests waiting for it.
func (w *acpWorld) opts() drover.Options {
	zero := 0
	return drover.Options{
		Binary: w.bin, Cwd: w.cwd, Tier: drover.TierSupervised,
		Endpoint: &drover.Endpoint{BaseURL: w.url, APIKey: "sk-e2e"}, APIRetries: &zero,
		ConfigDir: filepath.Join(w.home, "config"),
		Env: map[string]string{"HOME": w.home, "XDG_CONFIG_HOME": filepath.Join(w.home, ".config"),
			"XDG_DATA_HOME": filepath.Join(w.home, ".local/share"), "XDG_CACHE_HOME": filepath.Join(w.home, ".cache"),
			"XDG_STATE_HOME": filepath.Join(w.home, ".local/state")},
		Timeout: 3 * time.Minute, Control: drover.NewControl(), ApprovalTimeout: 2 * time.Minute,
	}
}

// run runs prompt through the engine with every built-in adapter, answering
// each permission request d through the run's Control, as a client does,
// and checks what every run must satisfy.
func (w *acpWorld) run(prompt string, d drover.PermissionDecision) []drover.Event {
	w.t.Helper()
	o := w.opts()
	var groups []int
	o.ProcessObserver = func(_, pgid int) { groups = append(groups, pgid) }
	events, err := drover.NewEngine(builtin.Registry()).Run(context.Background(), w.v.id, prompt, o)
	if err != nil {
		w.t.Fatal(err)
	}
	var evs []drover.Event
	for ev := range events {
		if err := uestest.ValidateEvent(ev); err != nil {
			w.t.Errorf("invalid event: %v", err)
		}
		if p, ok := ev.Payload.(drover.PermissionRequestPayload); ok {
			if err := o.Control.Respond(p.RequestID, d, "e2e"); err != nil {
				w.t.Errorf("respond: %v", err)
			}
		}
		evs = append(evs, ev)
	}
	w.t.Logf("events: %v", typesOf(evs))
	doneOf(w.t, evs)
	adaptertest.NoProcessIn(w.t, w.cwd)
	for _, g := range groups {
		if err := syscall.Kill(-g, 0); !errors.Is(err, syscall.ESRCH) {
			w.t.Errorf("process group %d still exists after the run (%v)", g, err)
		}
	}
	return evs
}

// TestPERM2_ACPVendorWriteApprovedAndDenied: in supervised, a shell command
// that writes a file is asked over ACP (Gemini's policy asks, OpenCode's
// permission config asks); approved through the Control, it runs (the file
// exists, its result success); denied, it does not (no file, its result
// denied). The answers are recorded as the client's.
func TestPERM2_ACPVendorWriteApprovedAndDenied(t *testing.T) {
	for _, v := range acpVendors {
		t.Run(v.id, func(t *testing.T) {
			for _, c := range []struct {
				file   string
				d      drover.PermissionDecision
				exists bool
				status drover.ToolStatus
			}{
				{"approved.txt", drover.PermissionDecision{Behavior: drover.Allow}, true, drover.ToolSuccess},
				{"denied.txt", drover.PermissionDecision{Behavior: drover.Deny, Message: "not this one"}, false, drover.ToolDenied},
			} {
				t.Run(string(c.d.Behavior), func(t *testing.T) {
					w := newACPWorld(t, v)
					evs := w.run("touch "+c.file, c.d)
					reqs := payloads[drover.PermissionRequestPayload](evs)
					if len(reqs) != 1 {
						t.Fatalf("permission requests %+v, want one", reqs)
					}
					ans := payloads[drover.PermissionAnswerPayload](evs)
					if len(ans) != 1 || ans[0].By != drover.ByClient || ans[0].Behavior != c.d.Behavior || ans[0].RequestID != reqs[0].RequestID {
						t.Fatalf("answers %+v", ans)
					}
					if _, err := os.Stat(filepath.Join(w.cwd, c.file)); (err == nil) != c.exists {
						t.Fatalf("%s exists: %v, want %v", c.file, err == nil, c.exists)
					}
					res := payloads[drover.ToolResultPayload](evs)
					if !slices.ContainsFunc(res, func(r drover.ToolResultPayload) bool {
						return r.ToolUseID == reqs[0].ToolUseID && r.Status == c.status
					}) {
						t.Fatalf("tool results %+v, want %s for %s", res, c.status, reqs[0].ToolUseID)
					}
					if d := doneOf(t, evs); d.Status != drover.StatusSuccess {
						t.Fatalf("done %+v", d)
					}
				})
			}
		})
	}
}
