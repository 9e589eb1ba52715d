package e2e

// Gemini CLI and OpenCode driven over ACP (ACP-1, PERM-2): the pinned
// gemini 0.61.0 (`gemini --acp`) and opencode 1.18.33 (`opencode acp`),
// each run given a engine.Control so that it is live, offline against
// fakemodel: the conformance suite, and a write approved and one denied
// through the Control.

import (
	"context"
	"errors"
	"iter"
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
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/uestest"
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

// TestACP1_ConformanceOverACP runs the conformance suite against each
// vendor driven over ACP.
func TestACP1_ConformanceOverACP(t *testing.T) {
	for _, v := range acpVendors {
		t.Run(v.id, func(t *testing.T) {
			adaptertest.Run(t, adaptertest.Harness{Adapter: v.adapter, Binary: vendorBin(t, v.command, v.binaryEnv),
				UnknownResume: v.unknownResume, Live: true})
		})
	}
}

// acpWorld is one live test's offline setup for a vendor:
// claude_test.go's world (fakemodel with interactive_claude_test.go's
// liveScript, a workspace, a home), as the live Codex tests use it, and
// the vendor's pinned CLI.
type acpWorld struct {
	*world
	v   acpVendor
	bin string
}

func newACPWorld(t *testing.T, v acpVendor) *acpWorld {
	t.Helper()
	return &acpWorld{world: newWorld(t, liveScript), v: v, bin: vendorBin(t, v.command, v.binaryEnv)}
}

// vendorOpts are a supervised live run's options: the world's (offline,
// no API retries) for the vendor, a home of the vendor's, a Control, and
// requests waiting for it.
func (w *acpWorld) vendorOpts() runOpts {
	o := w.opts()
	o.Binary, o.Tier, o.ConfigDir = w.bin, drover.TierSupervised, filepath.Join(w.home, "config")
	for _, d := range []struct{ env, sub string }{{"XDG_CONFIG_HOME", ".config"}, {"XDG_DATA_HOME", ".local/share"},
		{"XDG_CACHE_HOME", ".cache"}, {"XDG_STATE_HOME", ".local/state"}} {
		o.Env[d.env] = filepath.Join(w.home, d.sub)
	}
	o.Timeout, o.Control, o.ApprovalTimeout = 3*time.Minute, engine.NewControl(), 2*time.Minute
	return o
}

// answering passes events on, answering each permission request d
// through ctl as a client does.
func answering(t *testing.T, events iter.Seq[drover.Event], ctl *engine.Control, d drover.PermissionDecision) iter.Seq[drover.Event] {
	return func(yield func(drover.Event) bool) {
		for ev := range events {
			if p, ok := ev.Payload.(drover.PermissionRequestPayload); ok {
				if err := ctl.Respond(p.RequestID, d, "e2e"); err != nil {
					t.Errorf("respond: %v", err)
				}
			}
			if !yield(ev) {
				return
			}
		}
	}
}

// run runs prompt through the engine with every built-in adapter,
// answering each permission request d, and checks what every run must
// satisfy: one done, last; valid events; no process left, in the
// workspace or in the run's process groups.
func (w *acpWorld) run(prompt string, d drover.PermissionDecision) []drover.Event {
	w.t.Helper()
	o := w.vendorOpts()
	var groups []int
	o.Observer = func(_, pgid int) { groups = append(groups, pgid) }
	events, err := o.start(context.Background(), builtin.Registry(), w.v.id, prompt)
	if err != nil {
		w.t.Fatal(err)
	}
	evs := slices.Collect(answering(w.t, events, o.Control, d))
	w.t.Logf("events: %v", typesOf(evs))
	doneOf(w.t, evs)
	if bad := slices.IndexFunc(evs, func(ev drover.Event) bool { return uestest.ValidateEvent(ev) != nil }); bad >= 0 {
		w.t.Errorf("invalid event: %v", uestest.ValidateEvent(evs[bad]))
	}
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
