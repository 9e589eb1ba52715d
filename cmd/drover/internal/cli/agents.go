package cli

import (
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/spf13/cobra"
)

// agentInfo is one row of `drover agents`.
type agentInfo struct {
	ID string `json:"id"`
	drover.Availability
	Capabilities drover.Capabilities `json:"capabilities"`
}

func newAgentsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the agents drover can run: installed, path, version, tested",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			reg := builtin.Registry()
			var rows []agentInfo
			for _, id := range reg.List() {
				a, _ := reg.Get(id)
				rows = append(rows, agentInfo{ID: id, Availability: a.Available(cmd.Context()), Capabilities: a.Capabilities()})
			}
			return printList(e, asJSON, rows, []string{"AGENT", "INSTALLED", "VERSION", "TESTED", "PATH"}, func(r agentInfo) []string {
				inst, tested, ver, path := "no", "no (tested: "+r.TestedVersions+")", r.Version, r.Path
				if r.Installed {
					inst = "yes"
				}
				if r.Tested {
					tested = "yes"
				}
				if ver == "" {
					ver = "-"
				}
				if path == "" {
					path = r.Error
				}
				return []string{r.ID, inst, ver, tested, path}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per agent")
	return cmd
}
