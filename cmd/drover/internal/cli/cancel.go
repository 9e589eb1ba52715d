package cli

import (
	"fmt"

	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newCancelCmd(e *env) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "cancel RUN…",
		Short: "Cancel runs, also ones owned by another drover process (idempotent)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return e.withRuns(ctx, db, args, func(sup *runs.Supervisor, _ store.Store) error {
				for _, id := range args {
					if err := sup.Cancel(ctx, id); err != nil {
						return err
					}
					fmt.Fprintf(e.stderr, "drover: cancel requested for %s\n", id)
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}
