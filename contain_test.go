package drover_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/drover-run/drover"
)

// TestSEC2_Containment: Contain decides when set; by default every tier
// below autonomous is contained.
func TestSEC2_Containment(t *testing.T) {
	yes, no := true, false
	for _, c := range []struct {
		o            drover.Options
		on, explicit bool
	}{
		{drover.Options{}, true, false},
		{drover.Options{Tier: drover.TierDryRun}, true, false},
		{drover.Options{Tier: drover.TierAutonomous}, false, false},
		{drover.Options{Tier: "unrestricted"}, false, false},
		{drover.Options{Tier: drover.TierAutonomous, Contain: &yes}, true, true},
		{drover.Options{Tier: drover.TierSandbox, Contain: &no}, false, true},
	} {
		if on, explicit := c.o.Containment(); on != c.on || explicit != c.explicit {
			t.Errorf("%+v: %v %v", c.o, on, explicit)
		}
	}
}

func TestWorkDirs(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	cwd, dirs := drover.Options{AddDirs: []string{"a", "/b/../c"}}.WorkDirs()
	if cwd != wd || !slices.Equal(dirs, []string{filepath.Join(wd, "a"), "/c"}) {
		t.Errorf("%s %q", cwd, dirs)
	}
	cwd, dirs = drover.Options{Cwd: "/w/x/..", AddDirs: []string{"d"}}.WorkDirs()
	if cwd != "/w" || !slices.Equal(dirs, []string{"/w/d"}) {
		t.Errorf("%s %q", cwd, dirs)
	}
}
