package sqlite

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
)

// Checkpoints. In WAL mode a commit appends pages to the -wal file, and a
// checkpoint copies them into the database file so that the WAL can start
// over. SQLite runs one by default in the commit that takes the WAL past
// 1000 pages, on the committing connection: for drover's writer a third of
// its time under a steady stream (the copy and two fsyncs),
// during which every queued event waits.
//
// So the writer's connection checkpoints by itself only past
// walBackstop pages, and a checkpointer goroutine on a connection of its
// own runs PASSIVE checkpoints (which never wait for, nor block, readers
// or the writer) each time the writer has written about checkpointEvery
// pages, on another CPU: a writer-bound stream (BenchmarkWriteThroughput)
// commits a quarter more events per second. Under a stream that never
// pauses the checkpointer is always a little behind, and the WAL can only
// start over once it has been copied whole: the writer's backstop then
// copies what is left, syncs, and the WAL starts over, at most walBackstop
// pages long. What is left must be little, as every event queued meanwhile
// waits for it: counted in pages, not bytes of events, because a server's
// commits of a few events from as many runs write a page per event (each
// run's own leaf of the (run_id, seq) index). Counting bytes of events,
// the checkpointer ran every ~4500 pages there, the backstop copied and
// synced thousands, and the commit it ran in took 20-50 ms once a second;
// counting pages, 10-16 ms every second or two.
// Durability is unchanged: synchronous=NORMAL syncs the WAL at each
// checkpoint, whichever connection runs it.
const (
	walBackstop     = 8192 // pages (32 MiB at 4 KiB)
	checkpointEvery = 512  // pages written, as pagesWritten estimates them
)

// pagesWritten estimates the pages a commit of bytes of events of runs
// runs wrote to the WAL: the table pages the bytes fill, a leaf of the
// (run_id, seq) index per run, and the table's last page.
func pagesWritten(bytes, runs int) int {
	return bytes/4096 + runs + 1
}

// checkpointConfig is what Open passes on (tests make both small).
type checkpointConfig struct {
	backstop int   // pages
	every    int64 // pages
}

// checkpointer runs PASSIVE checkpoints on its own connection when told
// that enough has been committed. It owns its goroutine: close stops it and
// waits for it.
type checkpointer struct {
	db      *sql.DB
	every   int64         // pages
	signal  chan struct{} // one pending request at most
	stop    chan struct{}
	wg      sync.WaitGroup
	written atomic.Int64 // pages written since the last request
	done    atomic.Int64 // checkpoints run
}

func newCheckpointer(db *sql.DB, every int64) *checkpointer {
	c := &checkpointer{db: db, every: every, signal: make(chan struct{}, 1), stop: make(chan struct{})}
	c.wg.Go(c.loop)
	return c
}

// wrote records a commit that wrote about n pages and asks for a
// checkpoint every c.every pages. It never blocks.
func (c *checkpointer) wrote(n int) {
	if c.written.Add(int64(n)) < c.every {
		return
	}
	c.written.Store(0)
	select {
	case c.signal <- struct{}{}:
	default: // one is pending: it will copy these pages too
	}
}

func (c *checkpointer) loop() {
	ctx := context.Background()
	for {
		select {
		case <-c.stop:
			return
		case <-c.signal:
		}
		// A failure (SQLITE_BUSY while another process checkpoints, an
		// I/O error) leaves the pages to the next checkpoint, or to the
		// writer's backstop.
		if _, err := c.db.ExecContext(ctx, "PRAGMA wal_checkpoint(PASSIVE)"); err == nil {
			c.done.Add(1)
		}
	}
}

// close stops the goroutine, after the checkpoint in progress if any.
func (c *checkpointer) close() error {
	close(c.stop)
	c.wg.Wait()
	return c.db.Close()
}
