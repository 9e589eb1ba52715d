package cli

import (
	"encoding/json"
	"fmt"
	"text/tabwriter"

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
			if asJSON {
				enc := json.NewEncoder(e.stdout)
				for _, r := range rows {
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "AGENT\tINSTALLED\tVERSION\tTESTED\tPATH")
			for _, r := range rows {
				inst, tested, ver, path := "no", "no", r.Version, r.Path
				if r.Installed {
					inst = "yes"
				}
				if r.Tested {
					tested = "yes"
				} else {
					tested = "no (tested: " + r.TestedVersions + ")"
				}
				if ver == "" {
					ver = "-"
				}
				if path == "" {
					path = r.Error
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, inst, ver, tested, path)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per agent")
	return cmd
}
