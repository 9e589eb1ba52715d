// Package postgres is drover's shared ledger (LED-6): the store.Store
// contract on PostgreSQL (12 or later; tested on 15) through
// github.com/jackc/pgx/v5, so that drover processes on several machines
// record into, and read, one ledger. Its schema migrations are embedded in
// the binary and applied by [Open]; it passes the same contract suite
// (store/storetest) as store/sqlite and agrees with it wherever the
// contract is silent.
//
// # The cursor: commit order
//
// store.EventsAfter promises a follower that, once it has read cursor c,
// no event with a cursor ≤ c appears later. A sequence alone does not
// keep that promise under concurrent writers: transaction A takes cursor
// 10, transaction B takes 11 and commits first, a follower reads 11 and
// moves past 10 before A commits — and never sees it.
//
// So there is one writer of events at a time, ledger-wide: every
// transaction that appends events first takes one transaction-level
// advisory lock (pg_advisory_xact_lock, the same key in every process on
// the database), then reads the runs' last seqs, inserts, and commits. The
// events' cursors come from a sequence that does not cache, so within the
// lock they are handed out in the order the transactions hold it.
// PostgreSQL makes a committing transaction visible before it releases its
// locks, so the next appender takes its cursors only after every smaller
// cursor is visible: cursor order is commit order, for every reader (a
// streaming replica too, which applies commits in the order they were
// logged). Holding the lock also makes the seq check exact: no other
// transaction can append to a run between reading its last seq and
// writing after it.
//
// The price is that appends do not overlap, across all processes. The
// batched [Store.AppendAsync] writer (one per Store) is what makes that
// cheap: it group-commits the events of every run of its process, so a
// process holds the lock for one transaction per batch, not per event.
// Other transactions (starting, finishing and reading runs) never take the
// lock.
//
// # Durability and sharing
//
// A commit is durable as the server's settings make it (with PostgreSQL's
// defaults, it survives a crash of the server and of the machine). Several
// drover processes may open one database at once: migrations run in one
// transaction under their own advisory lock, so exactly one opener applies
// each; every other write is one statement or one transaction that locks
// the rows it reads before changing them.
//
// The ledger's tables live in the connection's search_path (public, by
// default): give drover a database of its own, or a schema of its own
// (…?search_path=drover in the URL, the schema created beforehand).
package postgres

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/batch"
)

// ErrClosed is returned by [Store.AppendAsync] once its Store is closed.
var ErrClosed = errors.New("postgres ledger closed")

// ErrNoLedger is what [Open] with [ExistingOnly] fails with (wrapped) when
// the database has no drover schema.
var ErrNoLedger = errors.New("no drover ledger in this database")

// Advisory lock keys (bigint, per database): "drover" and a number.
const (
	lockMigrate int64 = 0x64726f7665720001
	lockEvents  int64 = 0x64726f7665720002
)

// Store is a PostgreSQL ledger. It implements [store.Store] and
// [store.AsyncAppender], and is safe for concurrent use by many
// goroutines; several processes, on several machines, may share its
// database.
type Store struct {
	pool   *pgxpool.Pool
	cfg    config
	writer *batch.Writer
	notify notifier // LISTEN, once asked (notify.go)

	closeOnce sync.Once
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.AsyncAppender = (*Store)(nil)
)

type config struct {
	existingOnly bool
	maxConns     int32
	batch        batch.Config
}

// Option tunes [Open].
type Option func(*config)

// ExistingOnly makes [Open] fail with [ErrNoLedger] instead of creating
// the schema in a database that has none (for commands that only read).
// A ledger that exists is still brought up to date.
func ExistingOnly() Option {
	return func(c *config) { c.existingOnly = true }
}

// WithMaxConns sets how many connections the Store may open at once
// (default: pool_max_conns in the URL, else GOMAXPROCS, at least 4).
func WithMaxConns(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.maxConns = int32(n)
		}
	}
}

// WithBatchLimits bounds one transaction of the batched writer: at most
// events events and about bytes bytes of event JSON (defaults 1024 events,
// 4 MiB). Values ≤ 0 keep the default.
func WithBatchLimits(events, bytes int) Option {
	return func(c *config) { c.batch.SetLimits(events, bytes) }
}

// WithCommitDelay sets how long the batched writer lets a steady stream
// of events gather before each commit (default 1 ms): longer means fewer,
// larger commits, at that much added latency under load. An idle writer
// never waits. 0 commits as soon as the previous commit ends.
func WithCommitDelay(d time.Duration) Option {
	return func(c *config) { c.batch.CommitDelay = max(d, 0) }
}

// Open connects to the database named by url (postgres://user:pass@host:
// port/dbname?…, or any connection string pgx accepts) and applies the
// schema migrations this binary embeds that the database lacks, creating
// the schema if there is none (see [ExistingOnly]). Opening is idempotent
// and safe while other processes open or use the same database. Open fails
// if the database's schema is newer than this binary knows. ctx bounds the
// opening only; a URL without connect_timeout gets 10 s per connection
// attempt. Errors say what to check (server not running, password,
// database missing) and never hold the password.
//
// The returned Store owns a batched event writer goroutine
// ([Store.AppendAsync]); Close stops it.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{batch: batch.Defaults()}
	for _, o := range opts {
		o(&cfg)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres ledger: %w", err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 {
		pc.ConnConfig.ConnectTimeout = 10 * time.Second
	}
	switch {
	case cfg.maxConns > 0:
		pc.MaxConns = cfg.maxConns
	case !strings.Contains(url, "pool_max_conns"):
		pc.MaxConns = int32(max(4, runtime.GOMAXPROCS(0)))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("postgres ledger: %w", err)
	}
	s := &Store{pool: pool, cfg: cfg}
	if err := migrate(ctx, pool, cfg.existingOnly); err != nil {
		pool.Close()
		return nil, explain(err, pc.ConnConfig)
	}
	bc := cfg.batch
	bc.Closed, bc.Write, bc.RetryEach = ErrClosed, s.writeBatch, statementError
	s.writer = batch.New(bc)
	return s, nil
}

// AppendAsync implements store.AsyncAppender with the Store's batched
// writer: one goroutine that group-commits the events of every run of the
// process (see store/internal/batch for how batches are cut). Each event
// is acknowledged only once the transaction holding it has committed, and
// checked on its own: one that does not continue its run fails with
// store.ErrConflict (store.ErrNotFound for an unknown run) without failing
// the others of its transaction. After Close, [ErrClosed].
func (s *Store) AppendAsync(ev store.Event) <-chan error { return s.writer.AppendAsync(ev) }

// WriterStats counts the batched writer's work since Open.
type WriterStats = batch.Stats

// WriterStats returns the batched writer's counters; Events/Commits is
// the mean batch.
func (s *Store) WriterStats() WriterStats { return s.writer.Stats() }

// Close flushes the batched writer (every event already accepted by
// AppendAsync is committed or failed before Close returns), stops its
// goroutine and closes the connections, after letting calls in flight
// finish. Later calls fail. Close always returns nil; calling it again
// does nothing.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.writer.Close()
		s.closeNotifier()
		s.pool.Close()
	})
	return nil
}

// explain says what a failure to open means and what to check; the
// error it returns wraps err.
func explain(err error, cc *pgx.ConnConfig) error {
	where := fmt.Sprintf("%s:%d", cc.Host, cc.Port)
	if strings.HasPrefix(cc.Host, "/") {
		where = fmt.Sprintf("socket %s/.s.PGSQL.%d", cc.Host, cc.Port)
	}
	var pe *pgconn.PgError
	errors.As(err, &pe)
	var msg string
	switch code := pgCode(err); {
	case errors.Is(err, ErrNoLedger):
		return fmt.Errorf("database %s at %s: %w", cc.Database, where, err)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ENOENT):
		msg = fmt.Sprintf("cannot connect to PostgreSQL at %s: connection refused (is the server running there? "+
			"Check the host and port in the URL, and the server's listen_addresses)", where)
	case code == "28P01" || code == "28000":
		msg = fmt.Sprintf("PostgreSQL at %s refused user %s: %s (check the user and password in the URL or ~/.pgpass, "+
			"and the server's pg_hba.conf)", where, cc.User, pe.Message)
	case code == "3D000":
		msg = fmt.Sprintf("PostgreSQL at %s has no database %s: create it (createdb %s) or name an existing one in the URL",
			where, cc.Database, cc.Database)
	case code == "42501":
		msg = fmt.Sprintf("user %s may not create drover's tables in database %s at %s: %s (grant it, or let the owner open the ledger once)",
			cc.User, cc.Database, where, pe.Message)
	case errors.Is(err, context.DeadlineExceeded), isTimeout(err):
		msg = fmt.Sprintf("cannot connect to PostgreSQL at %s: timed out (is the host reachable? "+
			"connect_timeout in the URL sets how long to try)", where)
	default:
		return fmt.Errorf("postgres ledger %s at %s: %w", cc.Database, where, err)
	}
	return &openError{msg, err}
}

// openError is a failure to open, said plainly; it wraps the driver's
// error.
type openError struct {
	msg string
	err error
}

func (e *openError) Error() string { return e.msg }
func (e *openError) Unwrap() error { return e.err }

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// isUniqueViolation reports a PRIMARY KEY or UNIQUE constraint failure.
func isUniqueViolation(err error) bool { return pgCode(err) == "23505" }

// statementError reports whether the server refused a statement for what
// it held (worth retrying its batch one event at a time), rather than the
// connection, the server or its resources failing (which would only
// repeat per event).
func statementError(err error) bool {
	code := pgCode(err)
	if code == "" {
		return false
	}
	switch code[:2] {
	case "08", "53", "57", "58", "XX":
		return false
	}
	return true
}

// inTx runs fn in one read-committed transaction and commits it unless
// fn fails.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	return pgx.BeginFunc(ctx, s.pool, fn)
}

// Times are timestamptz, NULL for the zero time.

// now is the current time as the ledger keeps it (whole microseconds), for
// the defaults the Store writes back to its caller: what the caller then
// holds is what it will read back.
func now() time.Time { return time.Now().Truncate(time.Microsecond) }

func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

func timeVal(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// jsonArg is a json column's value, NULL when absent.
func jsonArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// limitArg is a LIMIT's value: NULL, no limit, for 0.
func limitArg(n int) any {
	if n <= 0 {
		return nil
	}
	return n
}
