package cli

import (
	"fmt"

	"github.com/drover-run/drover/api"
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
			return e.withRunService(ctx, db, args, func(svc api.Service) error {
				for _, id := range args {
					if _, err := svc.Cancel(ctx, api.RunIDParams{RunID: id}); err != nil {
						return serviceError(err)
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
