package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/termtext"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

// The commands about runs' changes (WS-2…WS-4, docs/workspaces.md): diff,
// apply, merge, discard, revise, compare, gc.

func newDiffCmd(e *env) *cobra.Command {
	var db string
	var stat, asJSON bool
	cmd := &cobra.Command{
		Use:   "diff RUN",
		Short: "Show a run's change to its git repository",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return e.withRunService(ctx, db, args, func(svc api.Service) error {
				c, err := svc.Change(ctx, api.RunIDParams{RunID: args[0]})
				if err != nil {
					return serviceError(err)
				}
				if asJSON {
					return json.NewEncoder(e.stdout).Encode(c)
				}
				return printDiff(e.stdout, c, stat)
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&stat, "stat", false, "only the files changed, with lines added and removed")
	cmd.Flags().BoolVar(&asJSON, "json", false, "the change as one JSON object: base, files, patch, check, state, decisions")
	return cmd
}

// printDiff writes c: its files (stat) or its patch, coloured as git
// colours it when w is a terminal.
func printDiff(w io.Writer, c *store.Change, stat bool) error {
	bw := bufio.NewWriter(w)
	defer bw.Flush()
	if c.State == store.ChangeOpen {
		fmt.Fprintf(bw, "run %s is still working: its change so far is not read until it ends\n", c.RunID)
		return nil
	}
	if len(c.Files) == 0 {
		fmt.Fprintf(bw, "run %s changed nothing in %s\n", c.RunID, c.Repo)
		return nil
	}
	if stat || c.Patch == "" {
		printStat(bw, c)
		if !stat && c.Truncated {
			fmt.Fprintf(bw, "\nthe patch is over the ledger's limit: git -C %s diff %s %s\n", c.Repo, short(c.Base), c.Branch)
		}
		return nil
	}
	color := os.Getenv("NO_COLOR") == "" && isTerminal(w)
	for line := range strings.Lines(c.Patch) {
		code := ""
		if color {
			switch {
			case strings.HasPrefix(line, "diff --git"), strings.HasPrefix(line, "index "), strings.HasPrefix(line, "--- "),
				strings.HasPrefix(line, "+++ "), strings.HasPrefix(line, "new file"), strings.HasPrefix(line, "deleted file"),
				strings.HasPrefix(line, "rename "), strings.HasPrefix(line, "similarity "), strings.HasPrefix(line, "old mode"), strings.HasPrefix(line, "new mode"):
				code = "1"
			case strings.HasPrefix(line, "@@"):
				code = "36"
			case strings.HasPrefix(line, "+"):
				code = "32"
			case strings.HasPrefix(line, "-"):
				code = "31"
			}
		}
		// The patch is the agent's text: what it says reaches the
		// terminal as text, never as its control sequences (SEC-6).
		text := termtext.Strip(strings.TrimSuffix(line, "\n"))
		if code != "" {
			fmt.Fprintf(bw, "\x1b[%sm%s\x1b[m\n", code, text)
		} else {
			fmt.Fprintln(bw, text)
		}
	}
	return nil
}

// printStat lists c's files as git diff --stat would say them.
func printStat(w io.Writer, c *store.Change) {
	tw := tabwriter.NewWriter(w, 2, 4, 1, ' ', 0)
	added, removed := 0, 0
	for _, f := range c.Files {
		name := termtext.Strip(f.Path)
		if f.From != "" {
			name = termtext.Strip(f.From) + " => " + name
		}
		counts := fmt.Sprintf("+%d -%d", f.Added, f.Removed)
		if f.Binary {
			counts = "binary"
		}
		fmt.Fprintf(tw, " %s\t%s\t%s\n", name, f.Kind, counts)
		added += f.Added
		removed += f.Removed
	}
	tw.Flush()
	fmt.Fprintf(w, " %d %s changed, +%d -%d\n", len(c.Files), plural(len(c.Files), "file", "files"), added, removed)
}

// short is a commit's short form.
func short(commit string) string {
	if len(commit) > 10 {
		return commit[:10]
	}
	return commit
}

// changeSummary says a change in a few words: "2 files +3 -1 pending".
func changeSummary(c *store.Change) string {
	switch c.State {
	case store.ChangeOpen:
		return "working"
	case store.ChangeNone:
		return "no change"
	}
	added, removed := 0, 0
	for _, f := range c.Files {
		added += f.Added
		removed += f.Removed
	}
	files := "files"
	if len(c.Files) == 1 {
		files = "file"
	}
	return fmt.Sprintf("%d %s +%d -%d %s", len(c.Files), files, added, removed, c.State)
}

// newDecideCmd is apply, merge or discard.
func newDecideCmd(e *env, use, short string, call func(context.Context, api.Service, string) (*store.Change, error), done func(*store.Change) string) *cobra.Command {
	var db string
	cmd := &cobra.Command{
		Use:   use + " RUN",
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := api.WithClient(cmd.Context(), "drover "+use)
			return e.withRunService(ctx, db, args, func(svc api.Service) error {
				c, err := call(ctx, svc, args[0])
				if err != nil {
					return serviceError(err)
				}
				fmt.Fprintln(e.stdout, done(c))
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	return cmd
}

func newApplyCmd(e *env) *cobra.Command {
	return newDecideCmd(e, "apply", "Apply a run's change to the working tree it came from, whole or not at all",
		func(ctx context.Context, svc api.Service, id string) (*store.Change, error) {
			return svc.Apply(ctx, api.DecideParams{RunID: id})
		},
		func(c *store.Change) string {
			return fmt.Sprintf("applied run %s's change to %s: %s (not committed)", c.RunID, c.Repo, fileList(c))
		})
}

func newMergeCmd(e *env) *cobra.Command {
	var noSquash bool
	cmd := newDecideCmd(e, "merge", "Merge a run's branch into the current branch (one squashed commit by default)",
		func(ctx context.Context, svc api.Service, id string) (*store.Change, error) {
			return svc.Merge(ctx, api.MergeParams{RunID: id, NoSquash: noSquash})
		},
		func(c *store.Change) string {
			commit := ""
			if n := len(c.Decisions); n > 0 {
				commit = c.Decisions[n-1].Detail
			}
			return fmt.Sprintf("merged %s into the current branch of %s as %s: %s", c.Branch, c.Repo, short(commit), fileList(c))
		})
	cmd.Flags().BoolVar(&noSquash, "no-squash", false, "make a merge commit with the run's branch as second parent")
	return cmd
}

func newDiscardCmd(e *env) *cobra.Command {
	return newDecideCmd(e, "discard", "Remove a run's workspace and branch: its change is discarded",
		func(ctx context.Context, svc api.Service, id string) (*store.Change, error) {
			return svc.Discard(ctx, api.DecideParams{RunID: id})
		},
		func(c *store.Change) string {
			return fmt.Sprintf("discarded run %s's change: its workspace and branch %s are removed", c.RunID, c.Branch)
		})
}

// fileList names a change's files, a few of them.
func fileList(c *store.Change) string {
	var names []string
	for i, f := range c.Files {
		if i == 5 {
			names = append(names, fmt.Sprintf("and %d more", len(c.Files)-5))
			break
		}
		names = append(names, termtext.Strip(f.Path))
	}
	return strings.Join(names, ", ")
}

func newReviseCmd(e *env) *cobra.Command {
	var db, fakeScript string
	var asJSON, fake bool
	cmd := &cobra.Command{
		Use:   "revise RUN PROMPT",
		Short: "Send a run's change back: a new run in its session and workspace, whose change includes the first's",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := api.WithClient(cmd.Context(), "drover revise")
			offline, err := newOffline(fake, fakeScript, "")
			if err != nil {
				return err
			}
			return e.withService(ctx, db, false, runs.Config{}, func(svc api.Service) error {
				p := api.ReviseParams{RunID: args[0], Prompt: args[1]}
				if offline != nil {
					// The run's own options, pointed at a model server
					// of this command's: the one it had is gone.
					g, err := svc.Get(ctx, api.GetParams{RunID: args[0], RecordOnly: true})
					if err != nil {
						return notFound("run", args[0], err)
					}
					var opts drover.Options
					if err := json.Unmarshal(g.Run.Options, &opts); err != nil {
						return fmt.Errorf("run %s's options: %w", args[0], err)
					}
					opts = runs.Unredact(opts)
					opts.Endpoint = nil
					apply, stop, err := offline.start(e, !asJSON)
					if err != nil {
						return err
					}
					defer stop()
					apply(&opts)
					p.Options = &opts
				}
				started, err := svc.Revise(ctx, p)
				if err != nil {
					return serviceError(err)
				}
				fmt.Fprintf(e.stderr, "drover: run %s continues run %s in %s\n", started.RunID, args[0], started.Workspace)
				return followRuns(ctx, e, svc, []string{started.RunID}, asJSON)
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the UES events as JSON lines on stdout, nothing else")
	cmd.Flags().BoolVar(&fake, "fakemodel", false, "run offline against drover's built-in scripted model server")
	cmd.Flags().StringVar(&fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	return cmd
}

// followRuns prints the events of runs ids until they end, asking for
// approvals on a terminal, then says their changes; the exit status is
// drover run's.
func followRuns(ctx context.Context, e *env, svc api.Service, ids []string, asJSON bool) error {
	bg := context.WithoutCancel(ctx)
	stop := context.AfterFunc(ctx, func() {
		for _, id := range ids {
			_, _ = svc.Cancel(bg, api.RunIDParams{RunID: id})
		}
	})
	defer stop()
	out := newConsole(e.stdout)
	human := newHuman(out, len(ids) > 1, false)
	var p printer = human
	var ask *asker
	if asJSON {
		p = &jsonPrinter{w: out}
	} else if isTerminal(e.stdin) {
		human.asking = true
		ask = newAsker(svc, e.stdin, out, human.labels, len(ids) > 1)
		defer ask.stop()
	}
	for evs, err := range svc.Follow(bg, api.FollowParams{Runs: ids}) {
		if err != nil {
			return serviceError(err)
		}
		for _, ev := range evs {
			if ask != nil {
				ask.seen(ev)
			}
			if err := printStored(p, ev); err != nil {
				return err
			}
		}
	}
	return awaitAndSay(ctx, e, svc, ids)
}

// awaitAndSay waits for runs ids, says their changes on stderr, and
// returns drover run's exit status for them.
func awaitAndSay(ctx context.Context, e *env, svc api.Service, ids []string) error {
	recs, err := svc.Await(context.WithoutCancel(ctx), api.AwaitParams{Runs: ids})
	if err != nil {
		return serviceError(err)
	}
	statuses := map[string]drover.DoneStatus{}
	for _, r := range recs.Runs {
		statuses[r.ID] = r.DoneStatus
	}
	sayChanges(context.WithoutCancel(ctx), e, svc, ids, nil)
	return exitFor(ctx, statuses)
}

// sayChanges tells, on stderr, what each of runs ids changed and what to
// do with it; several runs that worked in workspaces of their own are
// compared in a table (WS-4). labels name the runs (their agent when
// absent).
func sayChanges(ctx context.Context, e *env, svc api.Service, ids []string, labels map[string]string) {
	cmp, err := svc.Compare(ctx, api.CompareParams{Runs: ids})
	if err != nil {
		return
	}
	var rows []api.CompareRow
	for _, row := range cmp.Rows {
		if row.Change != nil {
			rows = append(rows, row)
		}
	}
	if len(rows) > 1 && rows[0].Change.Branch != "" {
		fmt.Fprintln(e.stderr)
		printCompare(e.stderr, rows)
		fmt.Fprintln(e.stderr, "drover: review with drover diff RUN; then apply, merge, discard or revise it")
		return
	}
	for _, row := range rows {
		c, label := row.Change, labels[row.Run.ID]
		if label == "" {
			label = row.Run.Agent
		}
		switch {
		case c.State == store.ChangeNone:
			fmt.Fprintf(e.stderr, "drover: %s: changed nothing in %s\n", label, c.Repo)
		case c.Branch != "":
			fmt.Fprintf(e.stderr, "drover: %s: %s on branch %s: drover diff %s, then apply, merge, discard or revise it\n",
				label, changeSummary(c), c.Branch, c.RunID)
		case c.State == store.ChangePending:
			fmt.Fprintf(e.stderr, "drover: %s: changed %s in place: drover diff %s\n", label, fileList(c), c.RunID)
		}
		if c.Check != nil {
			fmt.Fprintf(e.stderr, "drover: %s: check %q %s\n", label, c.Check.Command, checkSummary(c.Check))
		}
	}
}

func checkSummary(c *store.ChangeCheck) string {
	if c == nil {
		return "-"
	}
	if c.Passed {
		return "passed"
	}
	return fmt.Sprintf("failed (exit %d)", c.ExitCode)
}

// printCompare writes rows as a table: one run a line.
func printCompare(w io.Writer, rows []api.CompareRow) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "RUN\tAGENT\tSTATUS\tFILES\t+/-\tCOST\tDURATION\tCHECK\tCHANGE")
	for _, row := range rows {
		r := row.Run
		st := string(r.Outcome())
		files, lines, check, state := "-", "-", "-", "-"
		if c := row.Change; c != nil {
			added, removed := 0, 0
			for _, f := range c.Files {
				added += f.Added
				removed += f.Removed
			}
			files, lines, state = fmt.Sprint(len(c.Files)), fmt.Sprintf("+%d -%d", added, removed), string(c.State)
			if c.Check != nil {
				check = checkSummary(c.Check)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Agent, st, files, lines, cost(r.Usage), duration(r), check, state)
	}
	tw.Flush()
}

func newCompareCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "compare RUN...",
		Short: "Set runs side by side: status, files changed, +/-, cost, duration, check",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			return e.withRunService(ctx, db, args, func(svc api.Service) error {
				res, err := svc.Compare(ctx, api.CompareParams{Runs: args})
				if err != nil {
					return serviceError(err)
				}
				if asJSON {
					return json.NewEncoder(e.stdout).Encode(res)
				}
				printCompare(e.stdout, res.Rows)
				for _, row := range res.Rows {
					if c := row.Change; c != nil && c.Check != nil && !c.Check.Passed {
						fmt.Fprintf(e.stdout, "\n%s: %s\n%s\n", row.Run.ID, c.Check.Command, indent(termtext.Strip(lastLines(c.Check.Output, 10))))
					}
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "the comparison as one JSON object")
	return cmd
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s string) string { return "  " + strings.ReplaceAll(s, "\n", "\n  ") }

func newGCCmd(e *env) *cobra.Command {
	var db, olderThan string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove the workspaces and branches of runs whose change was decided (or that changed nothing)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := api.ParseAge(olderThan); err != nil {
				return usagef("--older-than: %q is not an age (e.g. 7d, 12h, 30m)", olderThan)
			}
			ctx := cmd.Context()
			return e.withService(ctx, db, false, runs.Config{Limit: 1}, func(svc api.Service) error {
				res, err := svc.Collect(ctx, api.CollectParams{OlderThan: olderThan})
				if err != nil {
					return serviceError(err)
				}
				for _, id := range res.Runs {
					fmt.Fprintf(e.stdout, "removed the workspace and branch of run %s\n", id)
				}
				if len(res.Runs) == 0 {
					fmt.Fprintln(e.stdout, "nothing to remove")
				}
				return nil
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVar(&olderThan, "older-than", "7d", "only runs whose change was decided longer ago than this (e.g. 7d, 12h, 0s)")
	return cmd
}
