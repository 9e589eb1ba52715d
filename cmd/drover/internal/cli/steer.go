package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

// newSteerCmd is drover steer: a user message into a live run, from any
// terminal (CTL-3).
func newSteerCmd(e *env) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "steer RUN MESSAGE…",
		Short: "Send a message into a live run (the agent sees it at its next step); the run may be owned by another drover",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			run, msg := args[0], strings.Join(args[1:], " ")
			return e.withRuns(ctx, db, args[:1], func(sup *runs.Supervisor, st store.Store) error {
				after := lastSeq(ctx, st, run)
				if err := sup.Steer(ctx, run, msg, "drover steer"); err != nil {
					return controlError(run, err)
				}
				if _, err := waitRecorded(ctx, sup, run, after, func(ev drover.Event) bool {
					p, ok := ev.Payload.(drover.SteerPayload)
					return ok && p.Message == msg && p.By == "drover steer"
				}); err != nil {
					return err
				}
				fmt.Fprintf(e.stderr, "drover: %s: message sent\n", run)
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

// newInterruptCmd is drover interrupt: end a live run's current turn and
// keep its session, unlike cancel (CTL-3).
func newInterruptCmd(e *env) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "interrupt RUN",
		Short: "End a live run's current turn, keeping its session to continue (unlike cancel); the run may be owned by another drover",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			run := args[0]
			return e.withRuns(ctx, db, args, func(sup *runs.Supervisor, st store.Store) error {
				after := lastSeq(ctx, st, run)
				if err := sup.Interrupt(ctx, run, "drover interrupt"); err != nil {
					return controlError(run, err)
				}
				if _, err := waitRecorded(ctx, sup, run, after, func(ev drover.Event) bool {
					return ev.Type == drover.TypeInterrupt
				}); err != nil {
					return err
				}
				sess := "SESSION"
				if r, err := st.GetRun(ctx, run); err == nil && r.SessionID != "" {
					sess = r.SessionID
				}
				fmt.Fprintf(e.stderr, "drover: %s: interrupted; continue its session with: drover run --session %s -a %s PROMPT\n", run, sess, agentOf(ctx, st, run))
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

// agentOf is run's agent, "AGENT" when unknown.
func agentOf(ctx context.Context, st store.Store, run string) string {
	if r, err := st.GetRun(ctx, run); err == nil {
		return r.Agent
	}
	return "AGENT"
}
