package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/termtext"
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
			return e.withRunService(ctx, db, args[:1], func(svc api.Service) error {
				run := args[0]
				g, err := svc.Get(ctx, api.GetParams{RunID: run})
				if err != nil {
					return serviceError(err)
				}
				if g.Run.Status.Terminal() {
					return notRunning(run)
				}
				req, err := pickRequest(run, g.Pending, args[1:])
				if err != nil {
					return err
				}
				after := g.Run.LastSeq
				if _, err := svc.Respond(ctx, api.RespondParams{RunID: run, RequestID: req.RequestID, PermissionDecision: d, By: "drover " + verb}); err != nil {
					return controlError(run, err)
				}
				a, err := waitRecorded(ctx, svc, run, after, func(ev drover.Event) bool {
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

// pickRequest returns the open request of pending named in args, or the
// run's only open one.
func pickRequest(run string, pending []drover.PermissionRequestPayload, args []string) (drover.PermissionRequestPayload, error) {
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

// describeRequest is a request's one-line description, as a person is
// shown it: with what would act on a terminal shown as escapes
// (termtext.Quote, SEC-6).
func describeRequest(p drover.PermissionRequestPayload) string {
	if p.Description != "" {
		return termtext.Quote(p.Description)
	}
	if p.ToolName != "" {
		return termtext.Quote(drover.DescribeCall(drover.ToolOther, p.ToolName, ""))
	}
	return "request"
}

// requestSubject is the exact subject of p's call (drover.CallSubject: its
// command, path, URL or pattern, else its input as JSON) shown by
// termtext.Quote, for when the description does not show it whole (a
// description is cut short, its whitespace collapsed); "" when it does,
// or p has no input.
func requestSubject(p drover.PermissionRequestPayload) string {
	if len(p.Input) == 0 {
		return ""
	}
	s := termtext.Quote(drover.CallSubject(p.Input))
	if strings.Contains(describeRequest(p), s) {
		return ""
	}
	return s
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

// notRunning says that run is not running.
func notRunning(run string) error {
	return fmt.Errorf("run %s is not running (see 'drover show %s')", run, run)
}

// controlError explains a refused answer, steer or interrupt in the CLI's
// words: what to do next. The service's code says which refusal it is.
func controlError(run string, err error) error {
	e := api.ErrorOf(err)
	switch {
	case e.Code == api.CodeNotFound:
		return usagef("%s (open requests: 'drover show %s')", e.Message, run)
	case e.Code == api.CodeConflict && strings.Contains(e.Message, engine.ErrNotLive.Error()):
		return notRunning(run)
	case e.Code == api.CodeConflict:
		return fmt.Errorf("%s (see 'drover logs %s')", e.Message, run)
	}
	return serviceError(err)
}

// waitRecorded follows run's events after seq after until one satisfies
// match, the run ends, or recordWait passes.
func waitRecorded(ctx context.Context, svc api.Service, run string, after int64, match func(drover.Event) bool) (drover.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, recordWait)
	defer cancel()
	for evs, err := range svc.Follow(ctx, api.FollowParams{Runs: []string{run}, AfterSeq: after}) {
		if err != nil {
			return drover.Event{}, serviceError(err)
		}
		for _, se := range evs {
			ev, err := decodeStored(se)
			if err != nil {
				return drover.Event{}, err
			}
			if match(ev) {
				return ev, nil
			}
		}
	}
	if ctx.Err() != nil {
		return drover.Event{}, fmt.Errorf("run %s did not record it within %s: is the drover process that runs it alive? (drover ps)", run, recordWait)
	}
	return drover.Event{}, fmt.Errorf("run %s ended before it recorded it", run)
}
