package cli

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newPsCmd(e *env) *cobra.Command {
	var db, status, agent, session string
	var all, asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List live and recent runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := api.ListParams{Agent: agent, Session: session, Limit: limit}
			if limit == 0 {
				p.Limit = math.MaxInt32 // all
			}
			if status != "" {
				for s := range strings.SplitSeq(status, ",") {
					p.Status = append(p.Status, store.RunStatus(s))
				}
			} else if !all {
				p.Since = time.Now().Add(-24 * time.Hour)
			}
			return e.withService(cmd.Context(), db, false, runs.Config{Limit: 1}, func(svc api.Service) error {
				res, err := svc.List(cmd.Context(), p)
				if err != nil {
					return serviceError(err)
				}
				header := []string{"RUN", "AGENT", "STATUS", "AGE", "DURATION", "COST", "PROMPT"}
				changes := map[string]*store.Change{}
				for i := range res.Changes {
					changes[res.Changes[i].RunID] = &res.Changes[i]
				}
				if len(changes) > 0 && !asJSON {
					header = slices.Insert(header, 6, "CHANGE")
				}
				return printList(e, asJSON, res.Runs, header, func(r store.Run) []string {
					row := []string{r.ID, r.Agent, runStatus(r, 30), age(r.CreatedAt), duration(r), cost(r.Usage), firstLine(r.Prompt, 40)}
					if len(header) > len(row) {
						change := "-"
						if c := changes[r.ID]; c != nil {
							change = changeSummary(c)
						}
						row = slices.Insert(row, 6, change)
					}
					return row
				})
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVar(&status, "status", "", "only these statuses (pending,running,completed,failed)")
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent")
	cmd.Flags().StringVar(&session, "session", "", "only this session")
	cmd.Flags().BoolVar(&all, "all", false, "all runs, not only the last 24 hours")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}
