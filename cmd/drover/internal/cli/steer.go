package cli

import (
	"fmt"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
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
			return e.withRunService(ctx, db, args[:1], func(svc api.Service) error {
				r, err := runRecord(ctx, svc, run)
				if err != nil {
					return serviceError(err)
				}
				if _, err := svc.Steer(ctx, api.SteerParams{RunID: run, Message: msg, By: "drover steer"}); err != nil {
					return controlError(run, err)
				}
				if _, err := waitRecorded(ctx, svc, run, r.LastSeq, func(ev drover.Event) bool {
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
			return e.withRunService(ctx, db, args, func(svc api.Service) error {
				r, err := runRecord(ctx, svc, run)
				if err != nil {
					return serviceError(err)
				}
				if _, err := svc.Interrupt(ctx, api.InterruptParams{RunID: run, By: "drover interrupt"}); err != nil {
					return controlError(run, err)
				}
				if _, err := waitRecorded(ctx, svc, run, r.LastSeq, func(ev drover.Event) bool {
					return ev.Type == drover.TypeInterrupt
				}); err != nil {
					return err
				}
				sess := "SESSION"
				if r.SessionID != "" {
					sess = r.SessionID
				}
				fmt.Fprintf(e.stderr, "drover: %s: interrupted; continue its session with: drover run --session %s -a %s PROMPT\n", run, sess, r.Agent)
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}
