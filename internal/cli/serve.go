package cli

import (
	"context"
	"errors"
	"io"

	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newServeCmd(e *env) *cobra.Command {
	var db string
	var stdio bool
	var limit int
	cmd := &cobra.Command{
		Use:   "serve --stdio",
		Short: "Serve the JSON-lines client protocol on stdin and stdout",
		Long: `Serve drover's client protocol (docs/protocol.md): one JSON request a line on
stdin, one JSON response or event a line on stdout. Runs are recorded in the
ledger like 'drover run' records them.

When stdin ends, drover cancels the runs this connection started (a program
that went away leaves no orphans), answers what is still in flight and exits
0. SIGINT or SIGTERM does the same and exits 130; a second one kills every
agent process group at once.`,
		Example: `  drover serve --stdio
  {"id":1,"op":"run","agent":"claude","prompt":"explain main.go"}
  {"id":2,"op":"subscribe","runs":["run_…"]}
  {"id":3,"op":"await","runId":"run_…"}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !stdio {
				return usagef("only --stdio is supported for now: drover serve --stdio")
			}
			ctx := cmd.Context()
			return withLedger(ctx, db, limit, func(sup *runs.Supervisor, st store.Store) error {
				srv := protocol.NewServer(sup, st, protocol.Config{})
				// stdin is hidden behind a plain io.Reader: a Read in
				// progress cannot be interrupted, so on a signal Serve
				// leaves it behind and the process exits.
				err := protocol.Serve(ctx, srv, struct{ io.Reader }{e.stdin}, e.stdout)
				if errors.Is(err, context.Canceled) {
					return exitError{ExitInterrupted}
				}
				return err
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&stdio, "stdio", false, "speak the protocol on stdin and stdout")
	cmd.Flags().IntVar(&limit, "limit", 8, "runs that may run at once; more wait as pending")
	return cmd
}
