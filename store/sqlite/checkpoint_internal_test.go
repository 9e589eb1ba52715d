package sqlite

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
)

// LED-1, PERF-2: under a stream that never pauses, the writer never waits
// for the checkpointer, the WAL keeps starting over (its file never grows
// far past the backstop, though the stream writes many times that), the
// checkpoints the writer asked for run on the checkpointer's connection,
// and every event is in the ledger.
//
// The checkpointer is held back while the stream is written, through its
// pool of one connection (as when a busy machine does not schedule it):
// with a checkpointer free to run, a PASSIVE checkpoint of its in progress
// makes the writer's backstop return SQLITE_BUSY at once, and how far the
// WAL grows meanwhile depends on how the two are scheduled, not on drover.
func TestLED1_CheckpointsOffTheWriterKeepTheWALBounded(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	const backstop = 256 // pages: 1 MiB
	s, err := Open(ctx, path, func(c *config) { c.checkpoint = checkpointConfig{backstop: backstop, every: 16} })
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Nothing has asked for a checkpoint yet: holding the checkpointer's
	// only connection stops it before it takes any lock of SQLite's.
	held, err := s.ck.db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := s.CreateRun(ctx, &store.Run{ID: "r", Agent: "claude", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	var autockpt int
	if err := s.w.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&autockpt); err != nil || autockpt != backstop {
		t.Fatalf("the writer's wal_autocheckpoint is %d (%v), want the backstop %d", autockpt, err, backstop)
	}
	text := strings.Repeat("x", 1000)
	const n = 16000 // ~16 MB of events, 16 times the backstop
	res := make([]<-chan error, 0, n)
	for i := 1; i <= n; i++ {
		res = append(res, s.Writer().AppendAsync(store.Event{RunID: "r", Seq: int64(i), Type: "text",
			JSON: fmt.Appendf(nil, `{"type":"text","seq":%d,"payload":{"content":%q}}`, i, text)}))
	}
	for i, r := range res {
		if err := <-r; err != nil {
			t.Fatalf("event %d: %v", i+1, err)
		}
	}
	if got := s.ck.done.Load(); got != 0 {
		t.Fatalf("%d checkpoints ran on the held checkpointer's connection", got)
	}
	st, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// The WAL starts over once a checkpoint has copied it whole: at the
	// latest at the backstop, plus the transaction that crossed it.
	if limit := int64(4 * backstop * 4096); st.Size() > limit {
		t.Errorf("WAL file %d bytes after %d events: it did not start over (limit %d)", st.Size(), n, limit)
	}
	// The writer asked for checkpoints on its way (every 16 pages): let the
	// checkpointer have its connection and wait for the one it then runs.
	// (A checkpointer that is never asked, or whose checkpoints fail,
	// leaves this loop to go test's -timeout.)
	if err := held.Close(); err != nil {
		t.Fatal(err)
	}
	for s.ck.done.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	evs, err := s.Events(ctx, "r", 0, 0)
	if err != nil || len(evs) != n || evs[n-1].Seq != n {
		t.Fatalf("%d events read back (%v), want %d", len(evs), err, n)
	}
}

// LED-1, PERF-2: the checkpointer follows the pages commits write, not the
// bytes of their events: a server's trickle of small events from many
// runs writes a page per event (each run's leaf of the (run_id, seq)
// index), and the WAL grows by that, however few the bytes.
func TestLED1_CheckpointsFollowPagesWritten(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := Open(ctx, path) // the default checkpointEvery: 512 pages
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const runs, rounds = 50, 12
	for r := range runs {
		if err := s.CreateRun(ctx, &store.Run{ID: fmt.Sprintf("r%d", r), Agent: "claude", Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
	}
	// One event per commit, round-robin over the runs: 600 commits of
	// ~60 bytes, 36 KB of events in all.
	for seq := 1; seq <= rounds; seq++ {
		for r := range runs {
			id := fmt.Sprintf("r%d", r)
			if err := s.Writer().Append(ctx, store.Event{RunID: id, Seq: int64(seq), Type: "text",
				JSON: fmt.Appendf(nil, `{"type":"text","runId":%q,"seq":%d}`, id, seq)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Each commit wrote at least its run's index leaf and the table's last
	// page: 1200 pages or more, two checkpoints' worth.
	deadline := time.Now().Add(10 * time.Second)
	for s.ck.done.Load() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := s.ck.done.Load(); got < 2 {
		t.Errorf("%d checkpoints after %d one-event commits over %d runs, want at least 2", got, runs*rounds, runs)
	}
}
