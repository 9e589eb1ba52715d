package cli

import (
	"strconv"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newSessionsCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List drover sessions: agent, head run, resume token, turns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return e.withService(cmd.Context(), db, false, runs.Config{Limit: 1}, func(svc api.Service) error {
				res, err := svc.Sessions(cmd.Context(), api.SessionsParams{Limit: limit})
				if err != nil {
					return serviceError(err)
				}
				return printList(e, asJSON, res.Sessions, []string{"SESSION", "AGENT", "HEAD RUN", "TURNS", "UPDATED", "RESUME TOKEN"}, func(s store.Session) []string {
					turns := len(s.Heads)
					if s.HeadRunID != "" {
						turns++
					}
					return []string{s.ID, s.Agent, s.HeadRunID, strconv.Itoa(turns), age(s.UpdatedAt), s.ResumeToken}
				})
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many sessions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per session")
	return cmd
}
