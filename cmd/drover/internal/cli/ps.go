package cli

import (
	"math"
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
				return printList(e, asJSON, res.Runs, []string{"RUN", "AGENT", "STATUS", "AGE", "DURATION", "COST", "PROMPT"}, func(r store.Run) []string {
					st := string(r.Status)
					if r.Error != "" {
						st += " (" + firstLine(r.Error, 30) + ")"
					}
					return []string{r.ID, r.Agent, st, age(r.CreatedAt), duration(r), cost(r.Usage), firstLine(r.Prompt, 40)}
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
