package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/internal/config"
	"github.com/drover-run/drover/internal/metrics"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/worker"
)

func newWorkerCmd(e *env) *cobra.Command {
	var db, id, fakeScript, fakeLog, metricsAddr string
	var notifyTo []string
	var agents, labels []string
	var limit int
	var lease time.Duration
	var fakeOn bool
	cmd := &cobra.Command{
		Use:               "worker --db postgres://… [--agents claude,codex] [--labels a,b] [--limit N]",
		PersistentPreRunE: localOnlyPreRun(e, "worker"),
		Short:             "Run queued runs from a shared PostgreSQL ledger (scale-out)",
		Long: `Serve the shared run queue of a PostgreSQL ledger (docs/scale-out.md): claim
the queued runs (drover serve --queue, drover run --queue) whose agent this
worker has and whose labels it carries, run them here, and record them in the
ledger as any drover does. Start as many workers, on as many machines, as you
like.

The worker heartbeats every lease/4. A worker that stops heartbeating (killed,
host lost, cut off from the database) for longer than its lease is declared
lost by the others, and its runs fail "worker lost": they are not run again.
Its id (--id, else one kept in drover's config directory) is how it knows
its own runs when it comes back: it kills what they left running.

Runs get this machine's credentials: the ledger keeps none.
--metrics-addr serves Prometheus metrics (its runs, the queue's depth, the
live workers) at /metrics on a loopback address (docs/telemetry.md).
SIGINT or SIGTERM stops claiming, cancels the runs going on and exits 130.`,
		Example: `  drover worker --db postgres://drover@db.internal/drover
  drover worker --db "$DROVER_DB" --agents claude,codex --labels gpu --limit 4`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			loc, err := postgresDB(db, "drover worker needs a PostgreSQL ledger (--db postgres://…): a SQLite file is not shared")
			if err != nil {
				return err
			}
			if limit < 0 || lease < 0 {
				return usagef("--limit and --lease must not be negative")
			}
			if _, err := worker.CheckLabels(labels); err != nil {
				return usagef("--labels: %v", err)
			}
			if len(labels) > worker.MaxLabels {
				return usagef("--labels: at most %d", worker.MaxLabels)
			}
			if metricsAddr != "" {
				if err := checkMetricsAddr(metricsAddr); err != nil {
					return err
				}
			}
			reg := builtin.Registry()
			if len(agents) == 0 {
				for _, a := range reg.List() {
					if ad, ok := reg.Get(a); ok && ad.Available(ctx).Installed {
						agents = append(agents, a)
					}
				}
				if len(agents) == 0 {
					return usagef("no agent is installed here (see 'drover agents'); name them with --agents")
				}
			}
			for i, a := range agents {
				ad, ok := reg.Get(a)
				if !ok {
					return usagef("--agents: unknown agent %q (see 'drover agents')", a)
				}
				agents[i] = ad.ID()
			}
			slices.Sort(agents)
			agents = slices.Compact(agents)
			if id == "" {
				if id, err = workerID(); err != nil {
					return err
				}
			}
			fake, err := newOffline(fakeOn, fakeScript, fakeLog)
			if err != nil {
				return err
			}
			apply, stopFake, err := fake.start(e, true)
			if err != nil {
				return err
			}
			defer stopFake()
			wcfg := worker.Config{ID: id, Agents: agents, Labels: labels, Limit: limit, Lease: lease, Defaults: apply, Logger: e.log,
				Profiles: resolveProfiles}
			st, loc, err := e.openLedger(ctx, loc, false)
			if err != nil {
				return err
			}
			defer st.Close()
			pg, ok := st.(*postgres.Store)
			if !ok {
				return fmt.Errorf("drover worker: %s is not a PostgreSQL ledger", redactURL(loc))
			}
			fmt.Fprintf(e.stderr, "drover: worker %s serving %s (labels %v)\n", id, strings.Join(agents, ","), labels)
			rcfg := runs.Config{Owner: worker.Owner(id), Limit: max(limit, 1) * 2}
			n, err := e.notifier(notifyTo)
			if err != nil {
				return err
			}
			defer closeNotifier(n)
			if n != nil {
				rcfg.Notifier = n
			}
			if metricsAddr != "" {
				m := metrics.New(e.log)
				m.AddQueue(func(ctx context.Context) (metrics.QueueStats, error) {
					s, err := worker.ReadStats(ctx, pg)
					return metrics.QueueStats{Queued: s.Queued, LiveWorkers: s.Live}, err
				})
				rcfg.Observer = m
				stop, err := serveMetrics(e, metricsAddr, m.Handler())
				if err != nil {
					return err
				}
				defer stop()
			}
			err = e.supervise(ctx, st, loc, rcfg, func(sup *runs.Supervisor, _ store.Store) error {
				return worker.Run(ctx, pg, sup, wcfg)
			})
			if err != nil {
				return err
			}
			return exitError{ExitInterrupted}
		},
	}
	addDBFlag(cmd, &db)
	addNotifyFlag(cmd, &notifyTo)
	cmd.Flags().StringSliceVar(&agents, "agents", nil, "agents this worker runs (default: the installed ones)")
	cmd.Flags().StringSliceVar(&labels, "labels", nil, fmt.Sprintf("labels this worker carries (at most %d): it serves runs that ask for any of them", worker.MaxLabels))
	cmd.Flags().IntVar(&limit, "limit", 8, "runs this worker runs at once")
	cmd.Flags().StringVar(&id, "id", "", "this worker's id (default: one made once and kept in drover's config directory, worker-id)")
	cmd.Flags().DurationVar(&lease, "lease", 10*time.Second, "how long this worker may miss heartbeats before the others fail its runs \"worker lost\"")
	cmd.Flags().BoolVar(&fakeOn, "fakemodel", false, "point every run that names no endpoint at drover's built-in scripted model server (offline)")
	cmd.Flags().StringVar(&fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	cmd.Flags().StringVar(&fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	addMetricsFlag(cmd, &metricsAddr)
	return cmd
}

// workerID returns this machine's worker id, kept in drover's config
// directory (worker-id), made on first use.
func workerID() (string, error) {
	path, err := config.WorkerIDFile()
	if err != nil {
		return "", err
	}
	if b, err := os.ReadFile(path); err == nil {
		if id := strings.TrimSpace(string(b)); id != "" {
			return id, nil
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("worker id: %w", err)
	}
	host, _ := os.Hostname()
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	id := host + "-" + hex.EncodeToString(b)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", fmt.Errorf("worker id: %w", err)
	}
	if err := os.WriteFile(path, []byte(id+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("worker id: %w", err)
	}
	return id, nil
}

// queueWanted in runs.Config.Queue asks supervise for the ledger's shared
// queue (--queue): the ledger is opened only there.
type queueWanted struct{}

func (queueWanted) Submit(context.Context, *store.Run, runs.Queued) error {
	return errors.New("the run queue was not opened")
}

// resolveQueue replaces queueWanted with the shared queue of st, which
// must be a PostgreSQL ledger; any other q is returned as it is.
func resolveQueue(ctx context.Context, q runs.Queue, st store.Store) (runs.Queue, error) {
	if _, ok := q.(queueWanted); !ok {
		return q, nil
	}
	pg, ok := st.(*postgres.Store)
	if !ok {
		return nil, usagef("--queue needs a PostgreSQL ledger (--db postgres://…): workers cannot share a SQLite file")
	}
	return worker.NewQueue(ctx, pg)
}

// postgresDB is the ledger --db names (see dbPath), which must be a
// PostgreSQL URL; any other is a usage error saying why.
func postgresDB(db, why string) (string, error) {
	loc, err := dbPath(db)
	if err != nil {
		return "", err
	}
	if !isPostgres(loc) {
		return "", usagef("%s", why)
	}
	return loc, nil
}

func newWorkersCmd(e *env) *cobra.Command {
	var db string
	var asJSON bool
	cmd := &cobra.Command{
		Use:               "workers",
		PersistentPreRunE: localOnlyPreRun(e, "workers"),
		Short:             "List the drover workers of a PostgreSQL ledger",
		Long: `List every drover worker that registered in the PostgreSQL ledger
(docs/scale-out.md): its id, host, agents, labels, state — live (heartbeating),
lost (its heartbeat stopped; its runs failed "worker lost") or stopped (it
ended on purpose) — and its last heartbeat.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			loc, err := postgresDB(db, "workers share a PostgreSQL ledger (--db postgres://…): a SQLite ledger has none")
			if err != nil {
				return err
			}
			st, err := e.openExistingLedger(ctx, loc)
			if err != nil {
				return err
			}
			defer st.Close()
			pg, ok := st.(*postgres.Store)
			if !ok {
				return fmt.Errorf("%s is not a PostgreSQL ledger", redactURL(loc))
			}
			ws, err := pg.Workers(ctx)
			if err != nil {
				return err
			}
			return printList(e, asJSON, ws, []string{"WORKER", "HOST", "AGENTS", "LABELS", "STATE", "HEARTBEAT"}, func(w postgres.Worker) []string {
				state := "live"
				switch {
				case !w.LostAt.IsZero():
					state = "lost"
				case !w.StoppedAt.IsZero():
					state = "stopped"
				case time.Since(w.HeartbeatAt) > w.Lease:
					state = "late"
				}
				return []string{w.ID, w.Host, strings.Join(w.Agents, ","), strings.Join(w.Labels, ","), state,
					w.HeartbeatAt.Local().Format(time.DateTime)}
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object a line")
	return cmd
}

// reapWith starts reaping lost workers when q is the shared queue (see
// worker.Queue.Reaping) and returns what stops it; for any other q it
// does nothing.
func reapWith(q runs.Queue, e *env) (stop func()) {
	if wq, ok := q.(*worker.Queue); ok {
		return wq.Reaping(e.log)
	}
	return func() {}
}
