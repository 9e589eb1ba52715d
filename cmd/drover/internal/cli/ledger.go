package cli

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/config"
	"github.com/drover-run/drover/internal/private"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/sqlite"
	"github.com/spf13/cobra"
)

// dbPath is the ledger: --db, else DROVER_DB, else the state directory's
// file. It is a file (a path or a file: URL: SQLite) or a postgres:// or
// postgresql:// URL (PostgreSQL); see openLedger.
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
	var opts []sqlite.Option
	if cfg.Limit <= fewRuns {
		// A run's appends touch a handful of pages; half the default
		// cache is 0.5 MB less of drover run's peak (PERF-2).
		opts = append(opts, sqlite.WithWriteCache(512<<10))
	}
	st, loc, err := e.openLedger(ctx, db, false, opts...)
	if err != nil {
		return err
	}
	defer st.Close()
	return e.supervise(ctx, st, loc, cfg, fn)
}

// fewRuns is the most runs at once of a process whose SQLite ledger gets
// the small write cache (drover run's limit is 8 unless it starts more).
const fewRuns = 16

// supervise runs fn with a supervisor over st, the ledger at loc, closed
// when fn returns.
func (e *env) supervise(ctx context.Context, st store.Store, loc string, cfg runs.Config, fn func(*runs.Supervisor, store.Store) error) error {
	cfg.Logger = e.log
	cfg.Protected = protected(loc)
	if cfg.Workspaces == "" {
		// Runs' workspaces live in drover's state, not in the user's
		// tree (WS-1); without a state directory none are made.
		if d, err := stateDir(); err == nil {
			cfg.Workspaces = filepath.Join(d, "worktrees")
		}
	}
	q, err := resolveQueue(ctx, cfg.Queue, st)
	if err != nil {
		return err
	}
	cfg.Queue = q
	defer reapWith(q, e)()
	sup, err := runs.New(ctx, engine.New(builtin.Registry()), st, cfg)
	if err != nil {
		return err
	}
	defer sup.Close()
	serveNested(sup, e.log)
	return fn(sup, st)
}

func addDBFlag(cmd *cobra.Command, db *string) {
	cmd.Flags().StringVar(db, "db", "", "ledger: a SQLite file, or a postgres:// URL (default $DROVER_DB, else $XDG_STATE_HOME/drover/drover.db)")
}

// errNoLedger is what openExistingLedger wraps when there is no ledger:
// no file, or a database without drover's schema.
var errNoLedger = errors.New("no ledger")

// openExistingLedger opens the ledger named by db (see dbPath) if it
// exists, and otherwise fails with an error wrapping errNoLedger.
func (e *env) openExistingLedger(ctx context.Context, db string) (store.Store, error) {
	st, _, err := e.openLedger(ctx, db, true)
	return st, err
}

// openLedger opens the ledger named by db (see dbPath) and returns it
// with its location (a SQLite file's absolute path): by
// the scheme of db, a PostgreSQL database (postgres:// or postgresql://)
// or a SQLite file (a path, relative or not, or a file: URL). A missing
// ledger is created, unless existing is set: then there must be one (a
// file, or a database with drover's schema), else the error wraps
// errNoLedger. A SQLite ledger's files, and its directory when it is
// drover's state directory, are kept private (BND-3): a mode something
// changed is repaired, with a warning in e's log; the user's own directory
// of a ledger elsewhere is left as it is, as it may be shared.
func (e *env) openLedger(ctx context.Context, db string, existing bool, opts ...sqlite.Option) (store.Store, string, error) {
	loc, err := dbPath(db)
	if err != nil {
		return nil, "", err
	}
	if isPostgres(loc) {
		var opts []postgres.Option
		if existing {
			opts = append(opts, postgres.ExistingOnly())
		}
		st, err := postgres.Open(ctx, loc, opts...)
		if errors.Is(err, postgres.ErrNoLedger) {
			return nil, "", fmt.Errorf("%w in %s: it has no drover schema yet (runs are recorded by 'drover run --db URL'; or pass another --db)", errNoLedger, redactURL(loc))
		}
		if err != nil {
			return nil, "", fmt.Errorf("open ledger %s: %w", redactURL(loc), err)
		}
		return st, loc, nil
	}
	path, err := sqlitePath(loc)
	if err != nil {
		return nil, "", err
	}
	if dir, err := stateDir(); err == nil && sameDir(filepath.Dir(path), dir) {
		if err := private.Keep(dir, "state directory", e.log); err != nil {
			return nil, "", err
		}
	}
	if existing {
		if _, err := os.Stat(path); err != nil {
			return nil, "", fmt.Errorf("%w at %s (runs are recorded by 'drover run'; or pass --db)", errNoLedger, path)
		}
	} else if dir := filepath.Dir(path); isStateDir(dir) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, "", fmt.Errorf("create ledger directory: %w", err)
		}
	} else if _, err := os.Stat(filepath.Dir(dir)); err != nil {
		// A ledger named by --db or DROVER_DB goes where it is named: its
		// directory is made, but not a whole missing path, which is a
		// typo more often than a wish.
		return nil, "", usagef("the ledger's directory %s does not exist, nor its parent (create it, or pass another --db)", dir)
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, "", fmt.Errorf("create ledger directory: %w", err)
	}
	st, err := sqlite.Open(ctx, path, append(opts, sqlite.WithLogger(e.log))...)
	if err != nil {
		return nil, "", fmt.Errorf("open ledger %s: %w", path, err)
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	return st, path, nil
}

// ledgerName names the ledger db names (see dbPath) in a message: a
// SQLite file by its absolute path, a PostgreSQL URL without its password.
func ledgerName(db string) string {
	loc, err := dbPath(db)
	if err != nil {
		return "(unknown)"
	}
	if isPostgres(loc) {
		return redactURL(loc)
	}
	if path, err := sqlitePath(loc); err == nil {
		loc = path
	}
	if abs, err := filepath.Abs(loc); err == nil {
		loc = abs
	}
	return loc
}

// sameDir reports whether a and b name one directory, however written.
func sameDir(a, b string) bool {
	fa, errA := os.Stat(a)
	fb, errB := os.Stat(b)
	if errA != nil || errB != nil {
		return filepath.Clean(a) == filepath.Clean(b)
	}
	return os.SameFile(fa, fb)
}

// isPostgres reports whether db is a PostgreSQL URL.
func isPostgres(db string) bool {
	scheme, _, ok := strings.Cut(db, "://")
	return ok && (strings.EqualFold(scheme, "postgres") || strings.EqualFold(scheme, "postgresql"))
}

// sqlitePath is the file a SQLite ledger db names: db itself, or the path
// of a file: URL (file:/abs/path, file:///abs/path, file:rel/path).
func sqlitePath(db string) (string, error) {
	if !strings.HasPrefix(strings.ToLower(db), "file:") {
		return db, nil
	}
	u, err := url.Parse(db)
	if err != nil {
		return "", usagef("--db %s: %v", db, err)
	}
	if u.Host != "" && u.Host != "localhost" {
		return "", usagef("--db %s: a file: URL names a local file (file:///path)", db)
	}
	if u.Opaque != "" {
		return url.PathUnescape(u.Opaque)
	}
	if u.Path == "" {
		return "", usagef("--db %s: no file named", db)
	}
	return u.Path, nil
}

// redactURL is a PostgreSQL URL fit to show: without its password.
func redactURL(db string) string {
	u, err := url.Parse(db)
	if err != nil {
		return "the --db URL"
	}
	return u.Redacted()
}

// stateDir is drover's state directory: $XDG_STATE_HOME/drover or
// ~/.local/state/drover.
// isStateDir reports whether dir is drover's state directory, which
// drover makes when it is missing.
func isStateDir(dir string) bool {
	sd, err := stateDir()
	return err == nil && sameDir(dir, sd)
}

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

// protected is drover's own state, which no run may be able to write
// (BND-3): the directory of a SQLite ledger at loc (its WAL and
// shared-memory files are beside it; a PostgreSQL ledger is the server's)
// and drover's configuration directory.
func protected(loc string) []string {
	var out []string
	if filepath.IsAbs(loc) {
		out = append(out, filepath.Dir(loc))
	}
	if dir, err := config.Dir(); err == nil {
		out = append(out, dir)
	}
	return out
}
