package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newShowCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: status, usage, cost (with its descendants'), duration, children, messages, tool calls",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return e.withStore(ctx, db, func(st store.Store) error {
				r, err := st.GetRun(ctx, args[0])
				if err != nil {
					return notFound("run", args[0], err)
				}
				children, err := st.Children(ctx, r.ID)
				if err != nil {
					return err
				}
				msgs, err := st.Messages(ctx, r.ID)
				if err != nil {
					return err
				}
				calls, err := st.ToolCalls(ctx, r.ID)
				if err != nil {
					return err
				}
				// The cost roll-up (MCP-1): the run with every run
				// started inside it, whichever drover process ran them.
				total, err := runs.SumTree(ctx, st, r.ID)
				if err != nil {
					return err
				}
				var pending []drover.PermissionRequestPayload
				if !r.Status.Terminal() {
					if pending, err = runs.OpenRequests(ctx, st, r.ID); err != nil {
						return err
					}
				}
				if asJSON {
					return json.NewEncoder(e.stdout).Encode(map[string]any{"run": r, "children": children, "total": total,
						"messages": msgs, "toolCalls": calls, "pending": pending})
				}
				w := e.stdout
				fmt.Fprintf(w, "run       %s\nagent     %s\nstatus    %s", r.ID, r.Agent, r.Status)
				if r.Error != "" {
					fmt.Fprintf(w, " (%s)", r.Error)
				}
				fmt.Fprintf(w, "\nsession   %s\n", r.SessionID)
				if r.ParentID != "" {
					fmt.Fprintf(w, "parent    %s\n", r.ParentID)
				}
				fmt.Fprintf(w, "created   %s\nduration  %s\n", r.CreatedAt.Format(time.RFC3339), duration(*r))
				u := r.Usage
				fmt.Fprintf(w, "usage     %d in / %d out tokens, %d tool calls", u.InputTokens, u.OutputTokens, u.ToolUses)
				if u.Turns != nil {
					fmt.Fprintf(w, ", %d turns", *u.Turns)
				}
				fmt.Fprintf(w, "\ncost      %s\n", cost(u))
				if total.Runs > 1 {
					t := total.Usage
					fmt.Fprintf(w, "total     %d in / %d out tokens, %d tool calls, cost %s over %d runs (this one and its descendants)",
						t.InputTokens, t.OutputTokens, t.ToolUses, cost(t), total.Runs)
					if total.WithoutCost > 0 {
						fmt.Fprintf(w, ", %d without a cost", total.WithoutCost)
					}
					fmt.Fprintln(w)
				}
				if r.ResumeToken != "" {
					fmt.Fprintf(w, "resume    %s\n", r.ResumeToken)
				}
				for _, c := range children {
					fmt.Fprintf(w, "child     %s %s %s\n", c.ID, c.Agent, c.Status)
				}
				if len(msgs) > 0 {
					fmt.Fprintln(w, "\nmessages")
					for _, m := range msgs {
						fmt.Fprintf(w, "  [%s] %s\n", m.Role, firstLine(m.Content, 100))
					}
				}
				if len(calls) > 0 {
					fmt.Fprintln(w, "\ntool calls")
					for _, c := range calls {
						fmt.Fprintf(w, "  %s %s %s", c.Name, c.Status, firstLine(string(c.Input), 80))
						if p := c.Permission; p != nil {
							fmt.Fprintf(w, " (%s by %s)", p.Behavior, answerSource(drover.PermissionAnswerPayload{By: p.By, Detail: p.Detail}))
						}
						fmt.Fprintln(w)
					}
				}
				if len(pending) > 0 {
					fmt.Fprintln(w, "\nwaiting for an answer (drover approve|deny RUN REQUEST)")
					for _, p := range pending {
						fmt.Fprintf(w, "  %s %s\n", p.RequestID, describeRequest(p))
					}
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run, children, total (usage with its descendants'), messages, tool calls and open permission requests as JSON")
	return cmd
}
