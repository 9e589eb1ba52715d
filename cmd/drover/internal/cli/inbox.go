package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/termtext"
	"github.com/drover-run/drover/runs"
	"github.com/spf13/cobra"
)

// newInboxCmd is drover inbox: every permission request waiting for an
// answer, across the runs of every drover process sharing the ledger
// (CON-2), answered in place on a terminal.
func newInboxCmd(e *env) *cobra.Command {
	var db, agent string
	var asJSON, ask, askSet bool
	cmd := &cobra.Command{
		Use:   "inbox",
		Short: "List the permission requests waiting for an answer, across all runs, and answer them",
		Long: `List every permission request waiting for an answer: the runs of this
drover, of other drover processes and of other machines sharing the ledger
(--db), or of a server (--server). For each: the run, its agent, the tool,
what the call does, how long it has waited and when it will be denied
without an answer.

On a terminal, drover then asks about each in turn: y allows, n [MESSAGE]
denies (the model is told MESSAGE), a allows the same call for the rest of
the run, s skips, q quits. --ask asks also when stdin is not a terminal
(answers piped in); --json lists as JSON lines and asks nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			askSet = cmd.Flags().Changed("ask")
			if ask && asJSON {
				return usagef("--ask and --json exclude each other")
			}
			asking := ask || (!askSet && !asJSON && isTerminal(e.stdin))
			err := e.withService(ctx, db, false, runs.Config{Limit: 1}, func(svc api.Service) error {
				res, err := svc.Requests(ctx, api.RequestsParams{Agent: agent})
				if err != nil {
					return serviceError(err)
				}
				if asJSON {
					return printList(e, true, res.Requests, nil, nil)
				}
				printInbox(e.stdout, res.Requests, time.Now())
				if !asking || len(res.Requests) == 0 {
					return nil
				}
				return answerInbox(ctx, svc, e.stdin, e.stdout, res.Requests)
			})
			if errors.Is(err, errNoLedger) {
				if !asJSON {
					printInbox(e.stdout, nil, time.Now())
				}
				return nil
			}
			return err
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent's runs")
	cmd.Flags().BoolVar(&asJSON, "json", false, "JSON lines, one request a line (runs.Waiting); nothing is asked")
	cmd.Flags().BoolVar(&ask, "ask", false, "ask about each request also when stdin is not a terminal")
	return cmd
}

// printInbox writes the waiting requests as a table, oldest first.
func printInbox(w io.Writer, ws []runs.Waiting, now time.Time) {
	if len(ws) == 0 {
		fmt.Fprintln(w, "no permission request is waiting")
		return
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tRUN\tAGENT\tTOOL\tWHAT\tWAITING\tDENIED IN")
	for i, x := range ws {
		// describeRequest and Quote make model text inert (SEC-6).
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", i+1, termtext.Strip(x.RunID), termtext.Strip(x.Agent),
			termtext.Quote(x.Request.ToolName), firstLine(describeRequest(x.Request), 60), waited(now, x.AskedAt),
			deadlineIn(now, x.Request.Deadline))
	}
	tw.Flush()
}

// waited is how long ago t was, to the second.
func waited(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return max(0, now.Sub(t)).Round(time.Second).String()
}

// deadlineIn is how long until a request's deadline (Unix ms) denies it;
// "never" without one.
func deadlineIn(now time.Time, deadline int64) string {
	if deadline == 0 {
		return "never"
	}
	return max(0, time.UnixMilli(deadline).Sub(now)).Round(time.Second).String()
}

// answerInbox asks about each request in ws in turn and answers it.
func answerInbox(ctx context.Context, svc api.Service, in io.Reader, out io.Writer, ws []runs.Waiting) error {
	r := bufio.NewReader(in)
	answered := 0
	for i, x := range ws {
		fmt.Fprintf(out, "\n[%d/%d] %s %s · %s wants to: %s\n", i+1, len(ws), x.Agent, x.RunID,
			termtext.Quote(x.Request.ToolName), describeRequest(x.Request))
		if s := requestSubject(x.Request); s != "" {
			fmt.Fprintf(out, "    exactly: %s\n", s)
		}
		for {
			fmt.Fprintf(out, "    allow? y(es), n(o) [MESSAGE], a(lways), s(kip), q(uit) — denied in %s: ", deadlineIn(time.Now(), x.Request.Deadline))
			line, err := r.ReadString('\n')
			line = strings.TrimSpace(line)
			if line == "" && err != nil {
				fmt.Fprintln(out)
				return inboxDone(out, answered)
			}
			switch strings.ToLower(line) {
			case "s", "skip":
			case "q", "quit":
				return inboxDone(out, answered)
			default:
				d, ok := parseAnswer(line)
				if !ok {
					continue
				}
				_, err := svc.Respond(ctx, api.RespondParams{RunID: x.RunID, RequestID: x.Request.RequestID, PermissionDecision: d, By: "drover inbox"})
				switch {
				case err == nil:
					answered++
					fmt.Fprintf(out, "    %s\n", answeredWord(d))
				case api.ErrorOf(err).Code == api.CodeConflict:
					fmt.Fprintf(out, "    (answered meanwhile, or the run has ended: %s)\n", api.ErrorOf(err).Message)
				default:
					return controlError(x.RunID, err)
				}
			}
			break
		}
	}
	return inboxDone(out, answered)
}

func answeredWord(d drover.PermissionDecision) string {
	switch {
	case d.Behavior == drover.Deny:
		return "denied"
	case d.Always:
		return "allowed for the rest of the run"
	}
	return "allowed"
}

func inboxDone(out io.Writer, answered int) error {
	fmt.Fprintf(out, "%s answered\n", count(int64(answered), "request"))
	return nil
}
