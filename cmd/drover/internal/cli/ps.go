package cli

import (
	"strings"
	"time"

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
			f := store.RunFilter{Agent: agent, SessionID: session, Limit: limit}
			if status != "" {
				for s := range strings.SplitSeq(status, ",") {
					f.Status = append(f.Status, store.RunStatus(s))
				}
			} else if !all {
				f.Since = time.Now().Add(-24 * time.Hour)
			}
			return e.withStore(cmd.Context(), db, func(st store.Store) error {
				rs, err := st.ListRuns(cmd.Context(), f)
				if err != nil {
					return err
				}
				return printList(e, asJSON, rs, []string{"RUN", "AGENT", "STATUS", "AGE", "DURATION", "COST", "PROMPT"}, func(r store.Run) []string {
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
