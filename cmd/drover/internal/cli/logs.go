package cli

import (
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newLogsCmd(e *env) *cobra.Command {
	var db string
	var follow, asJSON bool
	var after int64
	cmd := &cobra.Command{
		Use:   "logs RUN",
		Short: "Print a run's events from the ledger (-f follows a live run, also one owned by another drover)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			id := args[0]
			var p printer = newHuman(e.stdout, false, false)
			if asJSON {
				p = &jsonPrinter{w: e.stdout}
			}
			return e.withRuns(ctx, db, []string{id}, func(sup *runs.Supervisor, st store.Store) error {
				if !follow {
					evs, err := st.Events(ctx, id, after, 0)
					if err != nil {
						return err
					}
					for _, ev := range evs {
						if err := printStored(p, ev); err != nil {
							return err
						}
					}
					return nil
				}
				for ev, err := range sup.Follow(ctx, id, after) {
					if err != nil {
						if ctx.Err() != nil {
							return exitError{ExitInterrupted}
						}
						return err
					}
					if err := printStored(p, ev); err != nil {
						return err
					}
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "keep printing new events until the run ends")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the UES events as JSON lines")
	cmd.Flags().Int64Var(&after, "after", 0, "only events with a seq above this")
	return cmd
}
