package cli

import (
	"encoding/json"
	"fmt"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newWaitCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "wait RUN…",
		Short: "Wait until runs have ended; exit 0 only if all completed",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return e.withRunService(ctx, db, args, func(svc api.Service) error {
				res, err := svc.Await(ctx, api.AwaitParams{Runs: args})
				if err != nil {
					if ctx.Err() != nil {
						return exitError{ExitInterrupted}
					}
					return serviceError(err)
				}
				failed := false
				for _, r := range res.Runs {
					failed = failed || r.Status != store.StatusCompleted
					if asJSON {
						if err := json.NewEncoder(e.stdout).Encode(r); err != nil {
							return err
						}
						continue
					}
					line := fmt.Sprintf("%s %s", r.ID, runStatus(r, 200))
					fmt.Fprintln(inert{e.stdout}, line)
				}
				if failed {
					return exitError{ExitFailure}
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}
