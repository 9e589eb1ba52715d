package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

// recordWait is how long approve, deny, steer and interrupt wait to see
// what they asked for recorded in the ledger: the run's owner applies it
// within its poll interval (250 ms).
const recordWait = 10 * time.Second

func newApproveCmd(e *env) *cobra.Command { return newAnswerCmd(e, drover.Allow) }

func newDenyCmd(e *env) *cobra.Command { return newAnswerCmd(e, drover.Deny) }

// newAnswerCmd is drover approve and drover deny: the answer to a run's
// permission request, from any terminal, whichever drover process owns
// the run (CTL-1).
func newAnswerCmd(e *env, b drover.Behavior) *cobra.Command {
	var db, message string
	var always bool
	verb, done := "approve", "allowed"
	if b == drover.Deny {
		verb, done = "deny", "denied"
	}
	cmd := &cobra.Command{
		Use:   verb + " RUN [REQUEST]",
		Short: strings.ToUpper(verb[:1]) + verb[1:] + " a run's permission request (the only one open, or REQUEST); the run may be owned by another drover",
		Long: `Answer a permission request of a live run: the tool call it waits for is
` + done + `. Without REQUEST, the run's one open request is answered (with several
open, name one: 'drover show RUN' lists them). The answer reaches the drover
process that runs it through the ledger; this command waits until the run has
recorded it and says who answered first. Exit status 1 when another answer
(a rule, the deadline, another client) came first.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			if always && b == drover.Deny {
				return usagef("--always goes with approve")
			}
			d := drover.PermissionDecision{Behavior: b, Message: message, Always: always}
			return e.withRuns(ctx, db, args[:1], func(sup *runs.Supervisor, st store.Store) error {
				run := args[0]
				if r, err := st.GetRun(ctx, run); err == nil && r.Status.Terminal() {
					return controlError(run, engine.ErrNotLive)
				}
				req, err := pickRequest(ctx, sup, run, args[1:])
				if err != nil {
					return err
				}
				after := lastSeq(ctx, st, run)
				if err := sup.Respond(ctx, run, req.RequestID, d, "drover "+verb); err != nil {
					return controlError(run, err)
				}
				a, err := waitRecorded(ctx, sup, run, after, func(ev drover.Event) bool {
					p, ok := ev.Payload.(drover.PermissionAnswerPayload)
					return ok && p.RequestID == req.RequestID
				})
				if err != nil {
					return err
				}
				got := a.Payload.(drover.PermissionAnswerPayload)
				what := fmt.Sprintf("%s %s (%s)", run, req.RequestID, describeRequest(req))
				if got.By != drover.ByClient || got.Detail != "drover "+verb {
					fmt.Fprintf(e.stderr, "drover: %s was answered first by %s: %s\n", what, answerSource(got), got.Behavior)
					return exitError{ExitFailure}
				}
				fmt.Fprintf(e.stderr, "drover: %s %s\n", what, done)
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVarP(&message, "message", "m", "", "what the model is told with the answer")
	if b == drover.Allow {
		cmd.Flags().BoolVar(&always, "always", false, "also allow the same call for the rest of the run")
	}
	return cmd
}

// pickRequest returns the open request named in args, or the run's only
// open one.
func pickRequest(ctx context.Context, sup *runs.Supervisor, run string, args []string) (drover.PermissionRequestPayload, error) {
	pending, err := sup.Pending(ctx, run)
	if err != nil {
		return drover.PermissionRequestPayload{}, err
	}
	if len(args) == 1 {
		for _, p := range pending {
			if p.RequestID == args[0] {
				return p, nil
			}
		}
		// Not open: the supervisor says whether it was answered or never asked.
		return drover.PermissionRequestPayload{RequestID: args[0]}, nil
	}
	switch len(pending) {
	case 0:
		return drover.PermissionRequestPayload{}, usagef("run %s has no open permission request", run)
	case 1:
		return pending[0], nil
	}
	ids := make([]string, len(pending))
	for i, p := range pending {
		ids[i] = p.RequestID + " (" + describeRequest(p) + ")"
	}
	return drover.PermissionRequestPayload{}, usagef("run %s has %d open requests; name one: %s", run, len(pending), strings.Join(ids, ", "))
}

// describeRequest is a request's one-line description.
func describeRequest(p drover.PermissionRequestPayload) string {
	if p.Description != "" {
		return p.Description
	}
	if p.ToolName != "" {
		return drover.DescribeTool(p.ToolName, p.Input)
	}
	return "request"
}

// answerSource says who gave an answer: "the deadline", "rule allow:Read",
// "the dashboard".
func answerSource(a drover.PermissionAnswerPayload) string {
	switch a.By {
	case drover.ByRule:
		return "rule " + a.Detail
	case drover.ByClient:
		if a.Detail != "" {
			return a.Detail
		}
		return "a client"
	case drover.ByDeadline:
		return "the deadline"
	case drover.ByDefault:
		return "drover (nobody could answer)"
	case drover.ByRunEnd:
		return "the run's end"
	}
	return string(a.By)
}

// controlError explains a refused answer, steer or interrupt in the CLI's
// words: what to do next.
func controlError(run string, err error) error {
	switch {
	case errors.Is(err, engine.ErrRequestNotFound):
		return usagef("%v (open requests: 'drover show %s')", err, run)
	case errors.Is(err, engine.ErrAlreadyAnswered):
		return fmt.Errorf("%w (see 'drover logs %s')", err, run)
	case errors.Is(err, engine.ErrNotLive):
		return fmt.Errorf("run %s is not running (see 'drover show %s')", run, run)
	case errors.Is(err, engine.ErrNotSupported), errors.Is(err, drover.ErrValidation):
		return usageError{err}
	}
	return err
}

// lastSeq is the seq of run's last recorded event (0 when unknown).
func lastSeq(ctx context.Context, st store.Store, run string) int64 {
	if r, err := st.GetRun(ctx, run); err == nil {
		return r.LastSeq
	}
	return 0
}

// waitRecorded follows run's events after seq after until one satisfies
// match, the run ends, or recordWait passes.
func waitRecorded(ctx context.Context, sup *runs.Supervisor, run string, after int64, match func(drover.Event) bool) (drover.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	for se, err := range sup.Follow(ctx, run, after) {
		if err != nil {
			if ctx.Err() != nil {
				return drover.Event{}, fmt.Errorf("run %s did not record it within %s: is the drover process that runs it alive? (drover ps)", run, recordWait)
			}
			return drover.Event{}, err
		}
		ev, err := decodeStored(se)
		if err != nil {
			return drover.Event{}, err
		}
		if match(ev) {
			return ev, nil
		}
	}
	return drover.Event{}, fmt.Errorf("run %s ended before it recorded it", run)
}
