package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
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

// withLedger opens the ledger named by db (see dbPath), creating it if
// missing, and a supervisor over it that runs up to limit runs at once,
// for fn. The supervisor reconciles first (see withStore); on return it is
// closed, which cancels the runs fn left going and waits until they are
// recorded.
func (e *env) withLedger(ctx context.Context, db string, cfg runs.Config, fn func(*runs.Supervisor, store.Store) error) error {
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
	cfg.Logger = e.log
	// A drover started inside a run (drover mcp) records its runs in this
	// ledger whatever HOME or state directory its agent gave it (MCP-1).
	if abs, err := filepath.Abs(path); err == nil {
		cfg.Env = map[string]string{runs.EnvDB: abs}
	}
	sup, err := runs.New(ctx, drover.NewEngine(builtin.Registry()), st, cfg)
	if err != nil {
		return err
	}
	defer sup.Close()
	return fn(sup, st)
}

func addDBFlag(cmd *cobra.Command, db *string) {
	cmd.Flags().StringVar(db, "db", "", "ledger file (default $DROVER_DB, else $XDG_STATE_HOME/drover/drover.db)")
}

// withStore opens the existing ledger without a supervisor, for commands
// that only show what it records; it never creates one. It first
// reconciles, like a supervisor starting would: runs left pending or
// running by a drover process that is gone are marked failed and their
// process groups killed, so that what the command shows is true.
func (e *env) withStore(ctx context.Context, db string, fn func(store.Store) error) error {
	st, err := openExistingLedger(ctx, db)
	if err != nil {
		return err
	}
	defer st.Close()
	if err := runs.Reconcile(ctx, st, runs.DefaultOwner(), e.log); err != nil {
		return fmt.Errorf("reconcile ledger: %w", err)
	}
	return fn(st)
}

// errNoLedger is what openExistingLedger wraps when there is no ledger file.
var errNoLedger = errors.New("no ledger")

// openExistingLedger opens the ledger named by db (see dbPath) if it
// exists, and otherwise fails with an error wrapping errNoLedger.
func openExistingLedger(ctx context.Context, db string) (store.Store, error) {
	path, err := existingLedger(db)
	if err != nil {
		return nil, err
	}
	st, err := openLedger(ctx, path)
	if err != nil {
		return nil, fmt.Errorf("open ledger %s: %w", path, err)
	}
	return st, nil
}

// existingLedger returns the path of the ledger named by db (see dbPath),
// or an error wrapping errNoLedger if there is no file there.
func existingLedger(db string) (string, error) {
	path, err := dbPath(db)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%w at %s (runs are recorded by 'drover run'; or pass --db)", errNoLedger, path)
	}
	return path, nil
}

// withRuns is withLedger (one run at a time) for a command about the runs
// ids of the existing ledger: if one is not recorded there, it fails with
// a usage error before doing anything, and creates no ledger.
func (e *env) withRuns(ctx context.Context, db string, ids []string, fn func(*runs.Supervisor, store.Store) error) error {
	if _, err := existingLedger(db); errors.Is(err, errNoLedger) {
		return notFound("run", ids[0], store.ErrNotFound)
	} else if err != nil {
		return err
	}
	return e.withLedger(ctx, db, runs.Config{Limit: 1}, func(sup *runs.Supervisor, st store.Store) error {
		for _, id := range ids {
			if _, err := st.GetRun(ctx, id); err != nil {
				return notFound("run", id, err)
			}
		}
		return fn(sup, st)
	})
}

// notFound turns the store's ErrNotFound for the kind ("run", "session")
// named id into a usage error that says where to look; other errors pass.
func notFound(kind, id string, err error) error {
	if !errors.Is(err, store.ErrNotFound) {
		return err
	}
	see := "drover ps --all"
	if kind == "session" {
		see = "drover sessions"
	}
	return usagef("no %s %q in the ledger (see '%s')", kind, id, see)
}

// openLedger opens the SQLite ledger at path (created if missing).
func openLedger(ctx context.Context, path string) (store.Store, error) {
	return sqlite.Open(ctx, path)
}

// stateDir is drover's state directory: $XDG_STATE_HOME/drover or
// ~/.local/state/drover.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "drover"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find drover's state directory: %w (set XDG_STATE_HOME)", err)
	}
	return filepath.Join(home, ".local", "state", "drover"), nil
}
