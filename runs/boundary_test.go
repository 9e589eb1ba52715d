package runs_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// dirsAgent is hang with the capabilities the boundary tests need: extra
// directories and config homes.
func dirsAgent() *agenttest.Agent {
	a := hang()
	a.Caps = &drover.Capabilities{Tiers: drover.Tiers(), AddDirs: true, ConfigDir: true}
	return a
}

func recordedOptions(t *testing.T, st store.Store, id string) drover.Options {
	t.Helper()
	r, err := st.GetRun(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var o drover.Options
	if err := json.Unmarshal(r.Options, &o); err != nil {
		t.Fatal(err)
	}
	return o
}

func runCount(t *testing.T, st store.Store) int {
	t.Helper()
	rs, err := st.ListRuns(context.Background(), store.RunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// TestBND1_ChildWithinParent: a child's directories (working directory,
// extra directories) must lie within its parent's; one that asks for a
// directory outside them, also through a symbolic link, is refused with
// BOUNDARY_VIOLATION and nothing is recorded. A child that names no
// working directory works in its parent's; its vendor's config home is
// its own. The same holds for a parent owned by another drover process
// on the ledger.
func TestBND1_ChildWithinParent(t *testing.T) {
	root := t.TempDir()
	ws, extra, other := filepath.Join(root, "ws"), filepath.Join(root, "extra"), filepath.Join(root, "other")
	for _, d := range []string{filepath.Join(ws, "sub"), extra, other} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(other, filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "drover.db")
	local := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "a:1", Poll: 20 * time.Millisecond}, dirsAgent())
	remote := newFixtureOn(t, openStore(t, path), runs.Config{Owner: "b:2", Poll: 20 * time.Millisecond}, dirsAgent())
	ctx := context.Background()
	parent := local.start(t, runs.StartRequest{Agent: "hang", Prompt: "parent", Options: drover.Options{Cwd: ws, AddDirs: []string{extra}}})

	for _, f := range []*fixture{local, remote} {
		for name, o := range map[string]drover.Options{
			"subdirectory":        {Cwd: filepath.Join(ws, "sub")},
			"parent's extra dir":  {Cwd: ws, AddDirs: []string{filepath.Join(extra, "x")}},
			"its own config home": {Cwd: ws, ConfigDir: other},
		} {
			id := f.start(t, runs.StartRequest{Agent: "hang", Prompt: name, Options: o, ParentID: parent})
			if got := recordedOptions(t, f.st, id).Cwd; got != o.Cwd {
				t.Errorf("%s: recorded cwd %q", name, got)
			}
		}
		id := f.start(t, runs.StartRequest{Agent: "hang", Prompt: "no cwd", ParentID: parent})
		if got := recordedOptions(t, f.st, id).Cwd; got != ws {
			t.Errorf("a child naming no cwd works in %q, want its parent's %s", got, ws)
		}

		before := runCount(t, f.st)
		for name, o := range map[string]drover.Options{
			"another cwd":         {Cwd: other},
			"the parent's parent": {Cwd: root},
			"an extra dir":        {Cwd: ws, AddDirs: []string{other}},
			"a relative escape":   {Cwd: ws, AddDirs: []string{"../other"}},
			"through a link":      {Cwd: filepath.Join(ws, "escape")},
		} {
			_, err := f.sup.Start(ctx, runs.StartRequest{Agent: "hang", Prompt: name, Options: o, ParentID: parent})
			if drover.CodeOf(err, "") != drover.CodeBoundaryViolation {
				t.Errorf("%s: %v, want BOUNDARY_VIOLATION", name, err)
			}
		}
		if after := runCount(t, f.st); after != before {
			t.Errorf("refused children were recorded: %d runs, then %d", before, after)
		}
	}
	if err := local.sup.Cancel(ctx, parent); err != nil {
		t.Fatal(err)
	}
	local.await(t, parent)
}

// TestBND3_DroverStateOutsideEveryBoundary: a run whose write boundary
// (working directory, extra directory, config home) contains drover's own
// state (Config.Protected) is refused with BOUNDARY_VIOLATION before
// anything is recorded, below autonomous and whenever contained; a
// directory beside or inside that state is not refused, nor an autonomous
// run that is not contained (it has no boundary).
func TestBND3_DroverStateOutsideEveryBoundary(t *testing.T) {
	root := t.TempDir()
	state := filepath.Join(root, "home", ".local", "state", "drover")
	ws := filepath.Join(root, "home", "ws")
	for _, d := range []string{state, ws} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	f := newFixtureOn(t, openStore(t, filepath.Join(state, "drover.db")), runs.Config{Protected: []string{state}}, dirsAgent())
	ctx := context.Background()
	yes := true
	home := filepath.Join(root, "home")
	for name, o := range map[string]drover.Options{
		"cwd around it":              {Cwd: home},
		"cwd on it":                  {Cwd: state},
		"dry-run":                    {Cwd: home, Tier: drover.TierDryRun},
		"an extra dir around it":     {Cwd: ws, AddDirs: []string{home}},
		"a config home around it":    {Cwd: ws, ConfigDir: home},
		"a profile's home around it": {Cwd: ws, Failover: &drover.Failover{Profiles: []drover.Profile{{Name: "p", ConfigDir: home}}}},
		"contained autonomous":       {Cwd: home, Tier: drover.TierAutonomous, Contain: &yes},
	} {
		_, err := f.sup.Start(ctx, runs.StartRequest{Agent: "hang", Prompt: name, Options: o})
		if drover.CodeOf(err, "") != drover.CodeBoundaryViolation {
			t.Errorf("%s: %v, want BOUNDARY_VIOLATION", name, err)
		}
	}
	if n := runCount(t, f.st); n != 0 {
		t.Fatalf("%d refused runs recorded", n)
	}
	var ids []string
	for name, o := range map[string]drover.Options{
		"beside it":              {Cwd: ws},
		"inside it":              {Cwd: ws, ConfigDir: filepath.Join(state, "homes", "claude")},
		"uncontained autonomous": {Cwd: home, Tier: drover.TierAutonomous},
	} {
		ids = append(ids, f.start(t, runs.StartRequest{Agent: "hang", Prompt: name, Options: o}))
	}
	for _, id := range ids {
		if err := f.sup.Cancel(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	f.await(t, ids...)
}
