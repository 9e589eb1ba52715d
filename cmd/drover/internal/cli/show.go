package cli

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
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
			return e.withRunService(ctx, db, args[:1], func(svc api.Service) error {
				g, err := svc.Get(ctx, api.GetParams{RunID: args[0]})
				if err != nil {
					return notFound("run", args[0], err)
				}
				// Lists are lists, empty or not, whichever side of a
				// wire they were read on.
				r, children, msgs, calls, pending := g.Run, nonNil(g.Children), nonNil(g.Messages), nonNil(g.ToolCalls), nonNil(g.Pending)
				// The cost roll-up (MCP-1): the run with every run
				// started inside it, whichever drover process ran them.
				total := runs.TreeUsage{Usage: r.Usage, Runs: 1}
				if g.Total != nil {
					total = *g.Total
				} else if r.Usage.TotalCostUSD == nil {
					total.WithoutCost = 1
				}
				if asJSON {
					out := map[string]any{"run": r, "children": children, "total": total,
						"messages": msgs, "toolCalls": calls, "pending": pending}
					if g.Change != nil {
						out["change"] = g.Change
					}
					return json.NewEncoder(e.stdout).Encode(out)
				}
				w := inert{e.stdout}
				fmt.Fprintf(w, "run       %s\nagent     %s\nstatus    %s", r.ID, r.Agent, r.Outcome())
				if r.Error != "" && r.Outcome() == drover.OutcomeFailed {
					fmt.Fprintf(w, " (%s)", r.Error)
				}
				fmt.Fprintf(w, "\nsession   %s\n", r.SessionID)
				if r.ParentID != "" {
					fmt.Fprintf(w, "parent    %s\n", r.ParentID)
				}
				fmt.Fprintf(w, "created   %s\nduration  %s\n", r.CreatedAt.Format(time.RFC3339), duration(*r))
				u := r.Usage
				fmt.Fprintf(w, "usage     %d in / %d out tokens", u.InputTokens, u.OutputTokens)
				if calls := runs.CallSummary(u.ToolUses, r.Allowed, r.Denied); calls != "" {
					fmt.Fprintf(w, ", %s", calls)
				}
				if u.Turns != nil {
					fmt.Fprintf(w, ", %s", count(*u.Turns, "turn"))
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
					fmt.Fprintf(w, "child     %s %s %s\n", c.ID, c.Agent, c.Outcome())
				}
				if c := g.Change; c != nil {
					fmt.Fprintf(w, "change    %s in %s (base %s)\n", changeSummary(c), c.Repo, short(c.Base))
					if c.Branch != "" {
						fmt.Fprintf(w, "branch    %s", c.Branch)
						if c.Workspace != "" {
							fmt.Fprintf(w, " in %s", c.Workspace)
						}
						fmt.Fprintln(w)
					}
					if c.Check != nil {
						fmt.Fprintf(w, "check     %s: %s\n", c.Check.Command, checkSummary(c.Check))
					}
					for _, d := range c.Decisions {
						fmt.Fprintf(w, "decided   %s by %s at %s %s\n", d.Action, d.By, d.At.Format(time.RFC3339), d.Detail)
					}
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

// nonNil is s, or an empty slice for nil.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
