package engine_test

import (
	"errors"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/testkit/agenttest"
)

// TestSEC2_PlanContainmentFollowsLiveness: for an agent that sandboxes its
// own commands only headless (Capabilities.ContainLive), a plan is
// contained once the run can be answered or steered (a Control, or a
// runner that gives every run one: Defaults.Live) and not before;
// containment asked for a headless run is refused.
func TestSEC2_PlanContainmentFollowsLiveness(t *testing.T) {
	if err := contain.Available(); err != nil {
		t.Skipf("this kernel cannot contain: %v", err)
	}
	reg := drover.NewRegistry()
	caps := drover.Capabilities{Tiers: drover.Tiers(), Permissions: true,
		Contain: []drover.Tier{drover.TierAutonomous}, ContainLive: []drover.Tier{drover.TierSupervised}}
	if err := reg.Register(&agenttest.Agent{Name: "vendor", Caps: &caps}); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(reg)
	headless := engine.Containment{Reason: "vendor sandbox"}
	on := engine.Containment{On: true}
	p, err := eng.Resolve(engine.Request{Agent: "vendor"})
	if err != nil || p.Containment() != headless {
		t.Fatalf("headless: %+v, %v", p, err)
	}
	if q, err := p.WithHooks(engine.Hooks{Control: engine.NewControl()}); err != nil || q.Containment() != on {
		t.Errorf("given a Control: %+v, %v", q, err)
	}
	if p, err := eng.Resolve(engine.Request{Agent: "vendor", Defaults: engine.Defaults{Live: true}}); err != nil || p.Containment() != on {
		t.Errorf("resolved live: %+v, %v", p, err)
	}
	yes := true
	asked := drover.Options{Contain: &yes}
	if _, err := eng.Resolve(engine.Request{Agent: "vendor", Options: asked}); !errors.Is(err, drover.ErrUnsupportedOption) {
		t.Errorf("containment asked headless: %v", err)
	}
	if p, err := eng.Resolve(engine.Request{Agent: "vendor", Options: asked, Defaults: engine.Defaults{Live: true}}); err != nil || p.Containment() != on {
		t.Errorf("containment asked live: %+v, %v", p, err)
	}
}
