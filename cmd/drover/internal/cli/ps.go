package cli

import (
	"math"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newPsCmd(e *env) *cobra.Command {
	var db, status, agent, session string
	var all, asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List live and recent runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			p := api.ListParams{Agent: agent, Session: session, Limit: limit}
			if limit == 0 {
				p.Limit = math.MaxInt32 // all
			}
			var keep func(store.Run) bool // --status names an outcome: filtered here
			if status != "" {
				want := strings.Split(status, ",")
				onlyStatuses := true
				for _, w := range want {
					switch {
					case slices.Contains(ledgerStatuses, store.RunStatus(w)):
					case slices.Contains(drover.Outcomes(), drover.Outcome(w)):
						onlyStatuses = false
					default:
						return usagef("--status %s: want a run outcome (%s)", w, outcomeList())
					}
				}
				if onlyStatuses {
					for _, w := range want {
						p.Status = append(p.Status, store.RunStatus(w))
					}
				} else {
					keep = func(r store.Run) bool {
						return slices.Contains(want, string(r.Status)) || slices.Contains(want, string(r.Outcome()))
					}
				}
			} else if !all {
				p.Since = time.Now().Add(-24 * time.Hour)
			}
			return e.withService(cmd.Context(), db, false, runs.Config{Limit: 1}, func(svc api.Service) error {
				res, err := svc.List(cmd.Context(), p)
				if err != nil {
					return serviceError(err)
				}
				if keep != nil {
					res.Runs = slices.DeleteFunc(res.Runs, func(r store.Run) bool { return !keep(r) })
				}
				header := []string{"RUN", "AGENT", "STATUS", "AGE", "DURATION", "COST", "PROMPT"}
				changes := map[string]*store.Change{}
				for i := range res.Changes {
					changes[res.Changes[i].RunID] = &res.Changes[i]
				}
				if len(changes) > 0 && !asJSON {
					header = slices.Insert(header, 6, "CHANGE")
				}
				return printList(e, asJSON, res.Runs, header, func(r store.Run) []string {
					row := []string{r.ID, r.Agent, runStatus(r, 30), age(r.CreatedAt), duration(r), cost(r.Usage), firstLine(r.Prompt, 40)}
					if len(header) > len(row) {
						change := "-"
						if c := changes[r.ID]; c != nil {
							change = changeSummary(c)
						}
						row = slices.Insert(row, 6, change)
					}
					return row
				})
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVar(&status, "status", "", "only runs with these outcomes, comma-separated ("+outcomeList()+")")
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent")
	cmd.Flags().StringVar(&session, "session", "", "only this session")
	cmd.Flags().BoolVar(&all, "all", false, "all runs, not only the last 24 hours")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}

// ledgerStatuses are the statuses the ledger keeps, which it can select
// runs by.
var ledgerStatuses = []store.RunStatus{store.StatusPending, store.StatusRunning, store.StatusCompleted, store.StatusFailed}

// outcomeList names the outcomes for help and errors.
func outcomeList() string {
	var s []string
	for _, o := range drover.Outcomes() {
		s = append(s, string(o))
	}
	return strings.Join(s, ", ")
}
