package claude

import (
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/adaptertest"
)

func TestADP3_OptionsToFlags(t *testing.T) {
	base := "-p --output-format stream-json --verbose"
	sup := `--setting-sources "" --permission-mode dontAsk --allowedTools Edit(./**)`
	adaptertest.Flags(t, func(o drover.Options, _ string) ([]string, error) { return Args(o) }, []adaptertest.FlagCase{
		{Name: "defaults are supervised", Options: drover.Options{}, Want: base + " " + sup},
		{Name: "sandbox", Options: drover.Options{Tier: drover.TierSandbox}, Want: base + ` --setting-sources "" --permission-mode dontAsk --tools ""`},
		{Name: "dry-run", Options: drover.Options{Tier: drover.TierDryRun}, Want: base + ` --setting-sources "" --permission-mode dontAsk --tools Read,Glob,Grep`},
		{Name: "dry-run narrowed", Options: drover.Options{Tier: drover.TierDryRun, AllowedTools: []string{"Read", "Write"}}, Want: base + ` --setting-sources "" --permission-mode dontAsk --tools Read`},
		{Name: "autonomous", Options: drover.Options{Tier: drover.TierAutonomous}, Want: base + " --permission-mode bypassPermissions"},
		{Name: "everything", Options: drover.Options{Tier: drover.TierAutonomous, Model: "sonnet", MaxTurns: 3, MaxBudgetUSD: 0.25,
			AllowedTools: []string{"Read", "Bash"}, DisallowedTools: []string{"WebFetch"}, AddDirs: []string{"/data"},
			SystemPrompt: "be brief", PartialText: true, Resume: "abc"}, Want: base + " --permission-mode bypassPermissions --model sonnet --max-turns 3 --max-budget-usd 0.25 --tools Read,Bash --disallowedTools WebFetch --add-dir /data --append-system-prompt be brief --include-partial-messages --resume abc"},
		{Name: "add-dir in supervised is editable", Options: drover.Options{AddDirs: []string{"/data/x/"}}, Want: base + " " + sup + " --add-dir /data/x/ --allowedTools Edit(//data/x/**)"},
	})
	if _, err := TierArgs("yolo"); drover.CodeOf(err, "") != drover.CodeUnsupportedOption {
		t.Errorf("unknown tier: %v", err)
	}
}

// TestPERM2_LiveOptionsToFlags: a run that can be answered or steered
// speaks stream-json both ways and has its messages echoed; supervised
// asks on stdio what the headless tier denies (the default permission
// mode, the workspace-edit allowance kept); the other tiers keep their
// flags.
func TestPERM2_LiveOptionsToFlags(t *testing.T) {
	base := "-p --input-format stream-json --output-format stream-json --verbose --replay-user-messages"
	adaptertest.Flags(t, func(o drover.Options, _ string) ([]string, error) { return LiveArgs(o) }, []adaptertest.FlagCase{
		{Name: "supervised asks", Options: drover.Options{}, Want: base +
			` --setting-sources "" --permission-mode default --allowedTools Edit(./**) --permission-prompt-tool stdio`},
		{Name: "sandbox", Options: drover.Options{Tier: drover.TierSandbox}, Want: base + ` --setting-sources "" --permission-mode dontAsk --tools ""`},
		{Name: "dry-run", Options: drover.Options{Tier: drover.TierDryRun}, Want: base + ` --setting-sources "" --permission-mode dontAsk --tools Read,Glob,Grep`},
		{Name: "autonomous", Options: drover.Options{Tier: drover.TierAutonomous, Resume: "abc"}, Want: base + " --permission-mode bypassPermissions --resume abc"},
	})
}
