package cli

import (
	"strconv"

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
			return e.withStore(cmd.Context(), db, func(st store.Store) error {
				ss, err := st.ListSessions(cmd.Context(), limit)
				if err != nil {
					return err
				}
				return printList(e, asJSON, ss, []string{"SESSION", "AGENT", "HEAD RUN", "TURNS", "UPDATED", "RESUME TOKEN"}, func(s store.Session) []string {
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
