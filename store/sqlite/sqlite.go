// Package sqlite is drover's embedded ledger (LED-1): one SQLite file in WAL
// mode, driven by modernc.org/sqlite (no cgo), with its schema migrations
// embedded in the binary and applied by [Open].
//
// # Sharing one file
//
// Several drover processes may open the same file at once. Every write is
// one statement or a BEGIN IMMEDIATE transaction, so it takes SQLite's
// single write lock up front instead of upgrading a read lock later (an
// upgrade can fail with SQLITE_BUSY at once, whatever the busy timeout); a
// waiting writer retries for the busy timeout (30 s by default) before
// giving up. Within one
// process all writes go through one connection, so they queue in Go rather
// than in SQLite's sleep-and-retry busy handler. Reads use a separate pool
// of read-only connections and, thanks to WAL, never wait for a writer.
//
// # Durability
//
// The file is opened with synchronous=NORMAL. In WAL mode that means:
//
//   - A transaction that committed survives a crash of the process (even
//     kill -9): its pages are in the WAL file, handed to the operating
//     system, before the commit returns.
//   - A power failure or operating-system crash may lose the transactions
//     committed since the WAL was last synced (at a checkpoint). The file is
//     never corrupted: it comes back as of an earlier commit.
//
// [WithSynchronousFull] syncs the WAL at every commit, so a commit also
// survives power loss, at a cost in write throughput.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"sync"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/drover-run/drover/internal/private"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/internal/batch"
)

// ErrClosed is returned by the batched [Writer] once its Store is closed.
var ErrClosed = errors.New("sqlite ledger closed")

// Store is a SQLite ledger. It implements [store.Store] and is safe for
// concurrent use by many goroutines; several processes may share its file.
type Store struct {
	w      *sql.DB // the one write connection, BEGIN IMMEDIATE
	r      *sql.DB // read-only connections
	path   string
	cfg    config
	writer *Writer
	stmts  stmts
	seqs   seqCache // the writer's runs' last seqs
	ck     *checkpointer

	closeOnce sync.Once
	closeErr  error
}

var (
	_ store.Store         = (*Store)(nil)
	_ store.AsyncAppender = (*Store)(nil)
)

type config struct {
	log         *slog.Logger
	busyTimeout time.Duration
	syncFull    bool
	readConns   int
	writeCache  int // bytes
	batch       batch.Config
	checkpoint  checkpointConfig
}

// Option tunes [Open].
type Option func(*config)

// WithLogger gives Open a logger for what it repairs: the mode of a
// ledger file something changed (see Open). nil, the default, logs nothing.
func WithLogger(log *slog.Logger) Option {
	return func(c *config) { c.log = log }
}

// WithBusyTimeout sets how long a write waits for another process holding
// the file's write lock before it fails with SQLITE_BUSY (default 30 s;
// under a millisecond means not at all).
func WithBusyTimeout(d time.Duration) Option {
	return func(c *config) { c.busyTimeout = d }
}

// WithSynchronousFull syncs the WAL to disk at every commit
// (synchronous=FULL), so that a commit also survives a power failure or an
// operating-system crash. The default (NORMAL) survives process crashes only.
func WithSynchronousFull() Option {
	return func(c *config) { c.syncFull = true }
}

// WithBatchLimits bounds one transaction of the batched [Writer]: at most
// events events and about bytes bytes of event JSON (defaults 1024 events,
// 4 MiB). Values ≤ 0 keep the default.
func WithBatchLimits(events, bytes int) Option {
	return func(c *config) { c.batch.SetLimits(events, bytes) }
}

// WithCommitDelay sets how long the batched [Writer] lets a steady stream
// of events gather before each commit (default 1 ms): longer means fewer,
// larger commits and less CPU, at that much added latency under load. An
// idle writer never waits. 0 commits as soon as the previous commit ends.
func WithCommitDelay(d time.Duration) Option {
	return func(c *config) { c.batch.CommitDelay = max(d, 0) }
}

// WithWriteCache sets the page cache of the write connection (default
// 1 MiB; values under 64 KiB are taken as 64 KiB). The writer appends:
// it needs the path to the last leaf of each b-tree a run writes to, and
// the pages of the transaction in hand. A process with few runs at once
// (drover run) needs less than one with hundreds (drover serve).
func WithWriteCache(bytes int) Option {
	return func(c *config) { c.writeCache = max(bytes, 64<<10) }
}

// WithReadConns sets how many read connections may be open at once
// (default: GOMAXPROCS, at least 2).
func WithReadConns(n int) Option {
	return func(c *config) {
		if n > 0 {
			c.readConns = n
		}
	}
}

// Open opens the ledger at path, creating the file if needed, switches it to
// WAL mode and applies any schema migrations this binary embeds that the
// file lacks. Opening is idempotent and safe while other processes open or
// use the same file: migrations run in one write transaction, so exactly one
// opener applies each. Open fails if the file's schema is newer than this
// binary knows. ctx bounds the opening only.
//
// The ledger holds what agents read and ran, and only its user may reach
// it (BND-3): a new file is created with mode 0600 (SQLite gives its -wal
// and -shm files the same), and Open refuses a file, -wal or -shm file of
// another user and sets back to 0600 a mode something changed (with a
// bit for group or others, or without the owner's read and write; a
// contained agent can chmod what it cannot write), logging a warning
// ([WithLogger]).
//
// The returned Store owns a batched event writer goroutine ([Store.Writer]);
// Close stops it.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{
		busyTimeout: 30 * time.Second,
		writeCache:  1 << 20,
		readConns:   max(2, runtime.GOMAXPROCS(0)),
		batch:       batch.Defaults(),
		checkpoint:  checkpointConfig{backstop: walBackstop, every: checkpointEvery},
	}
	for _, o := range opts {
		o(&cfg)
	}
	if err := keepPrivate(path, cfg.log); err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	s := &Store{path: path, cfg: cfg}
	syncMode := "NORMAL"
	if cfg.syncFull {
		syncMode = "FULL"
	}
	busy := fmt.Sprintf("busy_timeout(%d)", cfg.busyTimeout.Milliseconds())
	wq := url.Values{}
	wq.Add("_pragma", busy)
	// The writer appends: it needs the b-trees' paths to their last pages
	// and the pages of the transaction in hand, not SQLite's default 2 MB
	// of cache, which a run filled with pages it would not read again
	// (peak RSS). 1 MB is 256 pages, a leaf for each of a
	// server's runs at once (WithWriteCache).
	wq.Add("_pragma", fmt.Sprintf("cache_size(-%d)", cfg.writeCache>>10))
	wq.Add("_pragma", "foreign_keys(1)")
	wq.Add("_pragma", "journal_mode(WAL)")
	wq.Add("_pragma", "synchronous("+syncMode+")")
	// Checkpoints are the checkpointer's; this is the backstop (see
	// checkpoint.go).
	wq.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", cfg.checkpoint.backstop))
	wq.Set("_txlock", "immediate")
	w, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// One write connection per process: in-process writers queue for it in
	// database/sql (woken as soon as it is free, no sleeping), and only
	// writers in other processes meet SQLite's busy handler, which polls.
	// The connection is kept for the Store's life, so the statements
	// prepared on it stay prepared.
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s.w = w

	// The first connection switches the file to WAL, which needs a moment of
	// exclusive access; a concurrent opener can make that (or the
	// migration's BEGIN IMMEDIATE) report SQLITE_BUSY before the busy
	// handler is installed. Retry for the busy timeout.
	if err := retryBusy(ctx, cfg.busyTimeout, func() error { return migrate(ctx, w) }); err != nil {
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	if err := s.stmts.prepare(ctx, w); err != nil {
		s.stmts.close()
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}

	rq := url.Values{}
	rq.Add("_pragma", busy)
	rq.Add("_pragma", "query_only(1)")
	r, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+rq.Encode())
	if err != nil {
		s.stmts.close()
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	r.SetMaxOpenConns(cfg.readConns)
	r.SetMaxIdleConns(cfg.readConns)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	s.r = r

	cq := url.Values{}
	cq.Add("_pragma", busy)
	cq.Add("_pragma", "synchronous("+syncMode+")")
	cq.Add("_pragma", "cache_size(-64)") // a checkpoint copies through a buffer of its own
	ck, err := sql.Open("sqlite", "file:"+escapePath(path)+"?"+cq.Encode())
	if err != nil {
		s.stmts.close()
		r.Close()
		w.Close()
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	ck.SetMaxOpenConns(1)
	ck.SetMaxIdleConns(1)
	ck.SetConnMaxLifetime(0)
	ck.SetConnMaxIdleTime(0)
	s.ck = newCheckpointer(ck, cfg.checkpoint.every)

	s.writer = newWriter(s)
	return s, nil
}

// keepPrivate creates the ledger file at path with the mode of drover's
// own files when missing, and keeps it and its -wal and -shm files private
// (private.Keep).
func keepPrivate(path string, log *slog.Logger) error {
	if err := private.CreateFile(path); err != nil {
		return err
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		if err := private.Keep(f, "ledger", log); err != nil {
			return err
		}
	}
	return nil
}

// escapePath makes path safe inside a file: URI (a '?' or '#' in a file
// name would otherwise start the query or fragment).
func escapePath(path string) string {
	return (&url.URL{Path: path}).EscapedPath()
}

// Path returns the file the Store was opened on.
func (s *Store) Path() string { return s.path }

// Writer returns the Store's batched event writer (LED-1). There is one per
// Store; it stops when the Store closes.
func (s *Store) Writer() *Writer { return s.writer }

// AppendAsync implements store.AsyncAppender through the Store's Writer.
func (s *Store) AppendAsync(ev store.Event) <-chan error { return s.writer.AppendAsync(ev) }

// Close flushes the batched writer (every event already accepted by
// [Writer.Append] is committed or failed before Close returns), stops its
// goroutine and closes the database, after letting calls in flight finish.
// Later Writer appends fail with [ErrClosed], other calls with an error.
// Calls of Close after the first return the first call's result.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.writer.b.Close()
		ckErr := s.ck.close()
		s.stmts.close()
		s.closeErr = errors.Join(ckErr, s.r.Close(), s.w.Close())
	})
	return s.closeErr
}

// retryBusy calls fn until it succeeds, fails with something other than
// SQLITE_BUSY/LOCKED, ctx ends or d has passed.
func retryBusy(ctx context.Context, d time.Duration, fn func() error) error {
	deadline := time.Now().Add(d)
	wait := time.Millisecond
	for {
		err := fn()
		if err == nil || !isBusy(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(err, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}

func sqliteCode(err error) (int, bool) {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code(), true
	}
	return 0, false
}

func isBusy(err error) bool {
	code, ok := sqliteCode(err)
	return ok && (code&0xff == sqlite3.SQLITE_BUSY || code&0xff == sqlite3.SQLITE_LOCKED)
}

// isUniqueViolation reports a PRIMARY KEY or UNIQUE constraint failure.
func isUniqueViolation(err error) bool {
	code, ok := sqliteCode(err)
	return ok && (code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY || code == sqlite3.SQLITE_CONSTRAINT_UNIQUE)
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE) and commits it
// unless fn fails.
func (s *Store) inTx(ctx context.Context, fn func(tx *sql.Tx) error) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		return errors.Join(err, ignoreDone(tx.Rollback()))
	}
	return tx.Commit()
}

func ignoreDone(err error) error {
	if errors.Is(err, sql.ErrTxDone) {
		return nil
	}
	return err
}

// Times are stored as Unix nanoseconds, NULL for the zero time.

func timeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UnixNano()
}

func timeVal(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return time.Unix(0, n.Int64).UTC()
}

// jsonArg stores a JSON value as TEXT, NULL when absent.
func jsonArg(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return string(b)
}

func jsonVal(s sql.NullString) []byte {
	if !s.Valid || s.String == "" {
		return nil
	}
	return []byte(s.String)
}
