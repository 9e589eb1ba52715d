package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

// dbPath is the ledger file: --db, else DROVER_DB, else the state directory.
func dbPath(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	if env := os.Getenv("DROVER_DB"); env != "" {
		return env, nil
	}
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "drover.db"), nil
}

// withLedger opens the ledger for one command and a supervisor over it.
func withLedger(ctx context.Context, db string, limit int, fn func(*runs.Supervisor, store.Store) error) error {
	path, err := dbPath(db)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("create ledger directory: %w", err)
	}
	st, err := openLedger(ctx, path)
	if err != nil {
		return fmt.Errorf("open ledger %s: %w", path, err)
	}
	defer st.Close()
	sup, err := runs.New(ctx, drover.NewEngine(builtin.Registry()), st, runs.Config{Limit: limit})
	if err != nil {
		return err
	}
	defer sup.Close()
	return fn(sup, st)
}

func addDBFlag(cmd *cobra.Command, db *string) {
	cmd.Flags().StringVar(db, "db", "", "ledger file (default $DROVER_DB, else $XDG_STATE_HOME/drover/drover.db)")
}

func newPsCmd(e *env) *cobra.Command {
	var db, status, agent, session string
	var all, asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "ps",
		Short: "List live and recent runs",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := store.RunFilter{Agent: agent, SessionID: session, Limit: limit}
			if status != "" {
				for s := range strings.SplitSeq(status, ",") {
					f.Status = append(f.Status, store.RunStatus(s))
				}
			} else if !all {
				f.Since = time.Now().Add(-24 * time.Hour)
			}
			return withStore(cmd.Context(), db, func(st store.Store) error {
				rs, err := st.ListRuns(cmd.Context(), f)
				if err != nil {
					return err
				}
				return printList(e, asJSON, rs, []string{"RUN", "AGENT", "STATUS", "AGE", "DURATION", "COST", "PROMPT"}, func(r store.Run) []string {
					st := string(r.Status)
					if r.Error != "" {
						st += " (" + firstLine(r.Error, 30) + ")"
					}
					return []string{r.ID, r.Agent, st, age(r.CreatedAt), duration(r), cost(r.Usage), firstLine(r.Prompt, 40)}
				})
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVar(&status, "status", "", "only these statuses (pending,running,completed,failed)")
	cmd.Flags().StringVar(&agent, "agent", "", "only this agent")
	cmd.Flags().StringVar(&session, "session", "", "only this session")
	cmd.Flags().BoolVar(&all, "all", false, "all runs, not only the last 24 hours")
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many runs (0 = all)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}

// withStore opens the ledger without a supervisor (read-only commands).
func withStore(ctx context.Context, db string, fn func(store.Store) error) error {
	path, err := dbPath(db)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("no ledger at %s (runs are recorded by 'drover run'; or pass --db)", path)
	}
	st, err := openLedger(ctx, path)
	if err != nil {
		return fmt.Errorf("open ledger %s: %w", path, err)
	}
	defer st.Close()
	// What a dead drover left running is shown as it is: failed.
	if err := runs.Reconcile(ctx, st, runs.DefaultOwner(), nil); err != nil {
		return fmt.Errorf("reconcile ledger: %w", err)
	}
	return fn(st)
}

// printList prints items as JSON lines, or as a table with header and one
// row of cells per item.
func printList[T any](e *env, asJSON bool, items []T, header []string, row func(T) []string) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, it := range items {
			if err := enc.Encode(it); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range items {
		fmt.Fprintln(tw, strings.Join(row(it), "\t"))
	}
	return tw.Flush()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

func duration(r store.Run) string {
	switch {
	case r.DurationMs > 0:
		return (time.Duration(r.DurationMs) * time.Millisecond).String()
	case !r.StartedAt.IsZero() && !r.Status.Terminal():
		return time.Since(r.StartedAt).Round(time.Second).String() + "…"
	}
	return "-"
}

func cost(u drover.Usage) string {
	if u.TotalCostUSD == nil {
		return "-"
	}
	return fmt.Sprintf("$%.4f", *u.TotalCostUSD)
}

func notFound(kind, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return usagef("no %s %q in the ledger (see 'drover ps --all')", kind, id)
	}
	return err
}

func newShowCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show RUN",
		Short: "Show a run: status, usage, cost, duration, children, messages, tool calls",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withStore(ctx, db, func(st store.Store) error {
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
				if asJSON {
					return json.NewEncoder(e.stdout).Encode(map[string]any{"run": r, "children": children, "messages": msgs, "toolCalls": calls})
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
						fmt.Fprintf(w, "  %s %s %s\n", c.Name, c.Status, firstLine(string(c.Input), 80))
					}
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the run, children, messages and tool calls as JSON")
	return cmd
}

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
			return withLedger(ctx, db, 1, func(sup *runs.Supervisor, st store.Store) error {
				if _, err := st.GetRun(ctx, id); err != nil {
					return notFound("run", id, err)
				}
				if !follow {
					evs, err := st.Events(ctx, id, after, 0)
					if err != nil {
						return err
					}
					for _, ev := range evs {
						if err := printStored(p, ev); err != nil {
							return err
						}
					}
					return nil
				}
				for ev, err := range sup.Follow(ctx, id, after) {
					if err != nil {
						if ctx.Err() != nil {
							return exitError{ExitInterrupted}
						}
						return err
					}
					if err := printStored(p, ev); err != nil {
						return err
					}
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

func printStored(p printer, ev store.Event) error {
	if jp, ok := p.(*jsonPrinter); ok {
		_, err := jp.w.Write(append(append([]byte(nil), ev.JSON...), '\n'))
		return err
	}
	var d drover.Event
	if err := json.Unmarshal(ev.JSON, &d); err != nil {
		return fmt.Errorf("ledger event %s#%d: %w", ev.RunID, ev.Seq, err)
	}
	return p.print(d)
}

func newCancelCmd(e *env) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   "cancel RUN…",
		Short: "Cancel runs, also ones owned by another drover process (idempotent)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withLedger(ctx, db, 1, func(sup *runs.Supervisor, st store.Store) error {
				for _, id := range args {
					if _, err := st.GetRun(ctx, id); err != nil {
						return notFound("run", id, err)
					}
					if err := sup.Cancel(ctx, id); err != nil {
						return err
					}
					fmt.Fprintf(e.stderr, "drover: cancel requested for %s\n", id)
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

func newWaitCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "wait RUN…",
		Short: "Wait until runs have ended; exit 0 only if all completed",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return withLedger(ctx, db, 1, func(sup *runs.Supervisor, st store.Store) error {
				for _, id := range args {
					if _, err := st.GetRun(ctx, id); err != nil {
						return notFound("run", id, err)
					}
				}
				rs, err := sup.Await(ctx, args...)
				if err != nil {
					if ctx.Err() != nil {
						return exitError{ExitInterrupted}
					}
					return err
				}
				failed := false
				for _, r := range rs {
					failed = failed || r.Status != store.StatusCompleted
					if asJSON {
						if err := json.NewEncoder(e.stdout).Encode(r); err != nil {
							return err
						}
						continue
					}
					line := fmt.Sprintf("%s %s", r.ID, r.Status)
					if r.Error != "" {
						line += " (" + r.Error + ")"
					}
					fmt.Fprintln(e.stdout, line)
				}
				if failed {
					return exitError{ExitFailure}
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per run")
	return cmd
}

func newSessionsCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	var limit int
	cmd := &cobra.Command{
		Use:   "sessions",
		Short: "List drover sessions: agent, head run, resume token, turns",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd.Context(), db, func(st store.Store) error {
				ss, err := st.ListSessions(cmd.Context(), limit)
				if err != nil {
					return err
				}
				return printList(e, asJSON, ss, []string{"SESSION", "AGENT", "HEAD RUN", "TURNS", "UPDATED", "RESUME TOKEN"}, func(s store.Session) []string {
					turns := len(s.Heads)
					if s.HeadRunID != "" {
						turns++
					}
					return []string{s.ID, s.Agent, s.HeadRunID, strconv.Itoa(turns), age(s.UpdatedAt), s.ResumeToken}
				})
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().IntVar(&limit, "limit", 50, "at most this many sessions")
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per session")
	return cmd
}
