package cli

import (
	"github.com/drover-run/drover/api"
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
			return e.withRunService(ctx, db, []string{id}, func(svc api.Service) error {
				if !follow {
					for after := after; ; {
						page, err := svc.Events(ctx, api.EventsParams{RunID: id, AfterSeq: after, Limit: 10000})
						if err != nil {
							return serviceError(err)
						}
						for _, raw := range page.Events {
							se, err := storedOf(raw)
							if err != nil {
								return err
							}
							if err := printStored(p, se); err != nil {
								return err
							}
							after = se.Seq
						}
						if !page.More || len(page.Events) == 0 {
							return nil
						}
					}
				}
				for evs, err := range svc.Follow(ctx, api.FollowParams{Runs: []string{id}, AfterSeq: after}) {
					if err != nil {
						if ctx.Err() != nil {
							return exitError{ExitInterrupted}
						}
						return serviceError(err)
					}
					for _, ev := range evs {
						if err := printStored(p, ev); err != nil {
							return err
						}
					}
				}
				if ctx.Err() != nil {
					return exitError{ExitInterrupted}
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
