package sqlite_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
	"github.com/drover-run/drover/store/storetest"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the child process of the multi-process
	// tests (STYLE 9: test the real boundary).
	if mode := os.Getenv(childEnv); mode != "" {
		os.Exit(childMain(mode))
	}
	goleak.VerifyTestMain(m)
}

// openTemp opens a new ledger file in t.TempDir() and closes it at cleanup.
func openTemp(t *testing.T, opts ...sqlite.Option) (*sqlite.Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "drover.db")
	return openPath(t, path, opts...), path
}

func openPath(t *testing.T, path string, opts ...sqlite.Option) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(t.Context(), path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawDB is a plain connection to path, independent of any Store.
func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// testEvent is a drover-shaped event of about 300 bytes.
func testEvent(run string, seq int64) store.Event {
	now := time.Now()
	js := fmt.Sprintf(`{"type":"text","agent":"claude","timestamp":%d,"sessionId":"5f0c4b1e-3a43-4c1e-9d5e-0a6f2b8e7c11",`+
		`"payload":{"content":"I'll create hello.txt with the requested content, then list the directory (step %d)."},`+
		`"metadata":{"vendor":"claude","model":"sonnet"},"runId":%q,"seq":%d}`, now.UnixMilli(), seq, run, seq)
	return store.Event{RunID: run, Seq: seq, Type: drover.TypeText, JSON: json.RawMessage(js), Time: now}
}

func createRuns(t testing.TB, s store.Store, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := s.CreateRun(context.Background(), &store.Run{ID: id, Agent: "claude", Prompt: "p"}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkRun asserts that run has exactly the events 1..n, in order, and
// LastSeq n.
func checkRun(t *testing.T, s store.Store, run string, n int64) {
	t.Helper()
	evs, err := s.Events(t.Context(), run, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(evs)) != n {
		t.Fatalf("%s: %d events, want %d", run, len(evs), n)
	}
	for i, ev := range evs {
		if ev.Seq != int64(i+1) || ev.RunID != run {
			t.Fatalf("%s: event %d is %s/%d", run, i, ev.RunID, ev.Seq)
		}
	}
	r, err := s.GetRun(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	if r.LastSeq != n {
		t.Fatalf("%s: LastSeq %d, want %d", run, r.LastSeq, n)
	}
}

// LED-6: the SQLite ledger passes the shared contract suite.
func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		path := filepath.Join(t.TempDir(), "drover.db")
		s, err := sqlite.Open(t.Context(), path)
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// LED-1: the file is in WAL mode.
func TestLED1_WAL(t *testing.T) {
	_, path := openTemp(t)
	var mode string
	if err := rawDB(t, path).QueryRow(`PRAGMA journal_mode`).Scan(&mode); err != nil {
		t.Fatal(err)
	}
	if mode != "wal" {
		t.Fatalf("journal_mode = %q, want wal", mode)
	}
}

// LED-1: migrations are embedded and applied once, however often and by
// however many Stores the file is opened.
func TestLED1_MigrationsIdempotent(t *testing.T) {
	s1, path := openTemp(t)
	createRuns(t, s1, "r1")
	s2 := openPath(t, path) // a second Store on the same file, while s1 is open
	if _, err := s2.GetRun(t.Context(), "r1"); err != nil {
		t.Fatalf("second Store: %v", err)
	}
	createRuns(t, s2, "r2")
	if _, err := s1.GetRun(t.Context(), "r2"); err != nil {
		t.Fatalf("first Store sees second's run: %v", err)
	}
	if err := errors.Join(s1.Close(), s2.Close()); err != nil {
		t.Fatal(err)
	}
	s3 := openPath(t, path)
	if rs, err := s3.ListRuns(t.Context(), store.RunFilter{}); err != nil || len(rs) != 2 {
		t.Fatalf("after reopening: %d runs, %v", len(rs), err)
	}
	var n, maxV int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if files, latest := migrationFiles(t); n != files || maxV != latest {
		t.Fatalf("schema_migrations has %d rows up to version %d, want %d up to %d", n, maxV, files, latest)
	}
}

// LED-1: a file migrated by a newer drover is refused, not damaged.
func TestLED1_NewerSchemaRefused(t *testing.T) {
	s, path := openTemp(t)
	s.Close()
	if _, err := rawDB(t, path).Exec(`INSERT INTO schema_migrations VALUES (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	s2, err := sqlite.Open(t.Context(), path)
	if err == nil {
		s2.Close()
		t.Fatal("Open accepted a newer schema")
	}
	if !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open: %v", err)
	}
}

// LED-1: several processes creating the same new file at once all succeed
// and the schema is applied once.
func TestLED1_ConcurrentOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	const children = 4
	cmds := make([]*exec.Cmd, children)
	for i := range cmds {
		cmds[i] = startChild(t, "open", path, fmt.Sprintf("child-%d", i))
	}
	for _, cmd := range cmds {
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
	}
	if err := childOpen(t.Context(), path, "parent"); err != nil {
		t.Errorf("parent: %v", err)
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, cmd.Stderr)
		}
	}
	s := openPath(t, path)
	if rs, err := s.ListRuns(t.Context(), store.RunFilter{}); err != nil || len(rs) != children+1 {
		t.Fatalf("%d runs, %v; want %d", len(rs), err, children+1)
	}
}

// LED-1: two processes write the same file at once — events, whole run
// lives, and read-modify-writes of a shared session and run — and neither
// loses anything or fails with SQLITE_BUSY.
func TestLED1_TwoProcesses(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	createRuns(t, s, "shared")
	if err := s.PutSession(ctx, &store.Session{ID: "shared", Agent: "claude"}); err != nil {
		t.Fatal(err)
	}
	cmd := startChild(t, "share", path, "child")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child said %q, %v\n%s", line, err, cmd.Stderr)
	}
	fmt.Fprintln(stdin, "go")
	parentErr := shareWork(ctx, s, "parent")
	if err := cmd.Wait(); err != nil {
		t.Errorf("child: %v\n%s", err, cmd.Stderr)
	}
	if parentErr != nil {
		t.Errorf("parent: %v", parentErr)
	}
	if t.Failed() {
		return
	}
	for _, p := range []string{"parent", "child"} {
		for i := range shareRuns {
			id := fmt.Sprintf("%s-%d", p, i)
			checkRun(t, s, id, shareEvents)
			r, _ := s.GetRun(ctx, id)
			if r.Status != store.StatusCompleted {
				t.Errorf("%s: status %s", id, r.Status)
			}
			if ms, err := s.Messages(ctx, id); err != nil || len(ms) != 1 {
				t.Errorf("%s: %d messages, %v", id, len(ms), err)
			}
		}
	}
	ss, err := s.GetSession(ctx, "shared")
	if err != nil {
		t.Fatal(err)
	}
	if got := len(ss.Heads) + 1; got != 2*shareAdvances { // +1: the head itself
		t.Errorf("session has %d heads, want %d: advances were lost", got, 2*shareAdvances)
	}
	if r, _ := s.GetRun(ctx, "shared"); !r.CancelRequested {
		t.Error("shared run not marked cancelled")
	}
}

// LED-1: the batched writer commits events of many runs, each Append
// returning only once its event is in the file (visible to a new
// connection), and forms batches under load.
func TestLED1_Writer(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	w := s.Writer()
	const runs, per = 8, 100
	for i := range runs {
		createRuns(t, s, fmt.Sprintf("r%d", i))
	}
	var wg sync.WaitGroup
	for i := range runs {
		wg.Go(func() {
			id := fmt.Sprintf("r%d", i)
			for seq := int64(1); seq <= per; seq++ {
				if err := w.Append(ctx, testEvent(id, seq)); err != nil {
					t.Errorf("%s/%d: %v", id, seq, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for i := range runs {
		checkRun(t, s, fmt.Sprintf("r%d", i), per)
	}

	// Persist first: once Append has returned, a connection opened
	// afterwards (another process would be the same) sees the event.
	createRuns(t, s, "vis")
	for seq := int64(1); seq <= 10; seq++ {
		if err := w.Append(ctx, testEvent("vis", seq)); err != nil {
			t.Fatal(err)
		}
		db := rawDB(t, path)
		var n int64
		if err := db.QueryRow(`SELECT COUNT(*) FROM events WHERE run_id = 'vis' AND seq = ?`, seq).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 1 {
			t.Fatalf("event vis/%d not visible to a new connection after Append returned", seq)
		}
		db.Close()
	}

	// Group commit: a burst of queued events takes few transactions.
	createRuns(t, s, "burst")
	before := w.Stats()
	const burst = 2000
	res := make([]<-chan error, burst)
	for i := range res {
		res[i] = w.AppendAsync(testEvent("burst", int64(i+1)))
	}
	for i, c := range res {
		if err := <-c; err != nil {
			t.Fatalf("burst %d: %v", i+1, err)
		}
	}
	after := w.Stats()
	commits, events := after.Commits-before.Commits, after.Events-before.Events
	if events != burst || commits > burst/10 {
		t.Errorf("burst of %d events took %d commits writing %d events", burst, commits, events)
	}
	t.Logf("burst: %d events in %d commits", events, commits)
	checkRun(t, s, "burst", burst)
}

// LED-1, LED-2: each event of a batch is checked on its own; one that does
// not continue its run fails alone.
func TestLED1_WriterPerEventErrors(t *testing.T) {
	s, _ := openTemp(t)
	ctx := t.Context()
	w := s.Writer()
	createRuns(t, s, "a", "b")
	// Queued back to back, so they usually share a transaction; the outcome
	// must be the same either way.
	c := []<-chan error{
		w.AppendAsync(testEvent("a", 1)),
		w.AppendAsync(testEvent("a", 3)), // gap
		w.AppendAsync(testEvent("nope", 1)),
		w.AppendAsync(testEvent("b", 1)),
		w.AppendAsync(testEvent("a", 2)),
		w.AppendAsync(testEvent("a", 2)), // duplicate
		w.AppendAsync(testEvent("b", 2)),
	}
	want := []error{nil, store.ErrConflict, store.ErrNotFound, nil, nil, store.ErrConflict, nil}
	for i := range c {
		if err := <-c[i]; !errors.Is(err, want[i]) || (want[i] == nil && err != nil) {
			t.Errorf("event %d: got %v, want %v", i, err, want[i])
		}
	}
	checkRun(t, s, "a", 2)
	checkRun(t, s, "b", 2)

	if err := w.Append(ctx, store.Event{Seq: 1}); err == nil {
		t.Error("Append without a run id succeeded")
	}
	if err := w.Append(ctx, testEvent("a", 0)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("Append seq 0: %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := w.Append(cctx, testEvent("a", 3)); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with a cancelled context: %v", err)
	}
}

// LED-1: Close commits every event already queued, then the writer refuses
// more with ErrClosed.
func TestLED1_WriterCloseFlushes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	s, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	createRuns(t, s, "r")
	w := s.Writer()
	const n = 500
	res := make([]<-chan error, n)
	for i := range res {
		res[i] = w.AppendAsync(testEvent("r", int64(i+1)))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i, c := range res {
		if err := <-c; err != nil {
			t.Fatalf("event %d queued before Close: %v", i+1, err)
		}
	}
	if err := w.Append(t.Context(), testEvent("r", n+1)); !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("Append after Close: %v", err)
	}
	if err := <-w.AppendAsync(testEvent("r", n+1)); !errors.Is(err, sqlite.ErrClosed) {
		t.Errorf("AppendAsync after Close: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkRun(t, openPath(t, path), "r", n)
}

// LED-1 durability: kill -9 a process that is appending through the
// batched writer; every event whose Append had returned (the child prints
// it only then) is in the file, and every run is consistent (events
// 1..LastSeq, nothing torn).
func TestLED1_CrashSafety(t *testing.T) {
	s, path := openTemp(t)
	ctx := t.Context()
	cmd := startChild(t, "crash", path, "")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	const killAfter, checkFirst = 600, 30
	acked := map[string]int64{} // run → highest seq acknowledged
	lines := 0
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		run, seqStr, ok := strings.Cut(sc.Text(), " ")
		seq, err := strconv.ParseInt(seqStr, 10, 64)
		if !ok || err != nil {
			t.Fatalf("child printed %q", sc.Text())
		}
		if seq != acked[run]+1 {
			t.Fatalf("child acknowledged %s/%d after %d", run, seq, acked[run])
		}
		acked[run] = seq
		lines++
		if lines <= checkFirst {
			// Persist first: acknowledged means readable by another process.
			evs, err := s.Events(ctx, run, seq-1, 1)
			if err != nil || len(evs) != 1 || evs[0].Seq != seq {
				t.Fatalf("%s/%d acknowledged but not visible: %v, %v", run, seq, evs, err)
			}
		}
		if lines == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
		}
	}
	err = cmd.Wait()
	if lines < killAfter {
		t.Fatalf("child stopped after %d acknowledgements: %v\n%s", lines, err, cmd.Stderr)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed: %v", err)
	}
	// Read back through a new Store, as a restarted drover would.
	s2 := openPath(t, path)
	for run, seq := range acked {
		r, err := s2.GetRun(ctx, run)
		if err != nil {
			t.Fatal(err)
		}
		if r.LastSeq < seq {
			t.Errorf("%s: acknowledged up to %d, file has %d", run, seq, r.LastSeq)
			continue
		}
		checkRun(t, s2, run, r.LastSeq)
	}
	t.Logf("%d events acknowledged before kill -9, all present", lines)
}

// Paths with URI-special characters name the file they say, and every
// option opens a working ledger.
func TestOpenOptions(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a dir?#%")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "led ger.db")
	s := openPath(t, path, sqlite.WithSynchronousFull(), sqlite.WithBusyTimeout(time.Second),
		sqlite.WithBatchLimits(2, 1<<10), sqlite.WithReadConns(1))
	createRuns(t, s, "r")
	for seq := int64(1); seq <= 5; seq++ {
		if err := s.Writer().Append(t.Context(), testEvent("r", seq)); err != nil {
			t.Fatal(err)
		}
	}
	// WithBatchLimits(2, …): a burst takes at least one commit per two events.
	before := s.Writer().Stats()
	var res []<-chan error
	for seq := int64(6); seq <= 15; seq++ {
		res = append(res, s.Writer().AppendAsync(testEvent("r", seq)))
	}
	for _, c := range res {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	if c := s.Writer().Stats().Commits - before.Commits; c < 5 {
		t.Errorf("10 events took %d commits with batches of at most 2", c)
	}
	checkRun(t, s, "r", 15)
	if s.Path() != path {
		t.Errorf("Path() = %q, want %q", s.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("ledger file: %v", err)
	}

	junk := filepath.Join(t.TempDir(), "junk.db")
	if err := os.WriteFile(junk, []byte(strings.Repeat("not a database ", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	if s, err := sqlite.Open(t.Context(), junk); err == nil {
		s.Close()
		t.Error("Open accepted a file that is not a database")
	}
}

// LED-1: an event that makes its whole transaction fail (here: a trigger
// refuses it) fails alone; the writer retries its neighbours one by one.
func TestLED1_WriterIsolatesFailingEvent(t *testing.T) {
	s, path := openTemp(t)
	createRuns(t, s, "r", "p")
	if _, err := rawDB(t, path).Exec(`CREATE TRIGGER poison BEFORE INSERT ON events
		WHEN NEW.type = 'poison' BEGIN SELECT RAISE(ABORT, 'poisoned event'); END`); err != nil {
		t.Fatal(err)
	}
	w := s.Writer()
	var res []<-chan error
	for seq := int64(1); seq <= 100; seq++ {
		res = append(res, w.AppendAsync(testEvent("r", seq)))
		if seq == 50 {
			bad := testEvent("p", 1)
			bad.Type = "poison"
			res = append(res, w.AppendAsync(bad))
		}
	}
	for i, c := range res {
		err := <-c
		if i == 50 {
			if err == nil || !strings.Contains(err.Error(), "poisoned") {
				t.Errorf("poisoned event: %v", err)
			}
		} else if err != nil {
			t.Errorf("event %d: %v", i, err)
		}
	}
	checkRun(t, s, "r", 100)
	checkRun(t, s, "p", 0)
	t.Logf("writer: %+v", w.Stats())
}

// LED-2: batches naming many runs (more than one last-seq query takes)
// and many events (more than one INSERT carries).
func TestAppendManyRuns(t *testing.T) {
	s, _ := openTemp(t)
	const runs = 150
	var evs []store.Event
	for i := range runs {
		createRuns(t, s, fmt.Sprintf("r%03d", i))
	}
	for seq := int64(1); seq <= 2; seq++ {
		for i := range runs {
			evs = append(evs, testEvent(fmt.Sprintf("r%03d", i), seq))
		}
	}
	if err := s.AppendEvents(t.Context(), evs); err != nil {
		t.Fatal(err)
	}
	var res []<-chan error
	for i := range runs {
		res = append(res, s.Writer().AppendAsync(testEvent(fmt.Sprintf("r%03d", i), 3)))
	}
	for _, c := range res {
		if err := <-c; err != nil {
			t.Fatal(err)
		}
	}
	for i := range runs {
		checkRun(t, s, fmt.Sprintf("r%03d", i), 3)
	}
	// A conflict in the last run fails the whole AppendEvents batch.
	evs = evs[:0]
	for i := range runs {
		evs = append(evs, testEvent(fmt.Sprintf("r%03d", i), 4))
	}
	evs[runs-1].Seq = 9
	if err := s.AppendEvents(t.Context(), evs); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("AppendEvents with one gap: %v", err)
	}
	checkRun(t, s, "r000", 3)
}

// LED-1: a ledger written by an older drover (only migration 0001 applied,
// with a turn record stored as copies) opens, is upgraded in place, and
// keeps its data; the upgraded file takes turn records by reference.
func TestLED1_UpgradeFrom0001(t *testing.T) {
	path := filepath.Join(t.TempDir(), "old.db")
	schema0001, err := os.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	for _, q := range []string{
		`PRAGMA journal_mode = WAL`,
		string(schema0001),
		`CREATE TABLE schema_migrations (version INTEGER NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL) STRICT`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`INSERT INTO runs (id, agent, prompt, status, created_at, ended_at) VALUES ('old', 'claude', 'p', 'completed', 1, 2)`,
		`INSERT INTO events (run_id, seq, type, json, time) VALUES ('old', 1, 'text', '{"type":"text"}', 1)`,
		`INSERT INTO messages (run_id, idx, role, content) VALUES ('old', 0, 'user', 'p'), ('old', 1, 'assistant', 'hi')`,
		`INSERT INTO tool_calls (run_id, ord, id, name, input, status, output, started_at)
			VALUES ('old', 0, 'tu', 'Bash', '{"command":"ls"}', 'success', 'a.go', 5)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%.40s: %v", q, err)
		}
	}
	db.Close()

	s := openPath(t, path)
	ctx := t.Context()
	ms, err := s.Messages(ctx, "old")
	if err != nil || len(ms) != 2 || ms[1].Content != "hi" {
		t.Fatalf("old messages after upgrade: %+v, %v", ms, err)
	}
	tcs, err := s.ToolCalls(ctx, "old")
	if err != nil || len(tcs) != 1 || tcs[0].Output != "a.go" || string(tcs[0].Input) != `{"command":"ls"}` {
		t.Fatalf("old tool calls after upgrade: %+v, %v", tcs, err)
	}
	checkRun(t, s, "old", 1)

	createRuns(t, s, "new")
	if err := s.AppendEvents(ctx, []store.Event{testEvent("new", 1)}); err != nil {
		t.Fatal(err)
	}
	if err := s.FinishRun(ctx, store.Finish{RunID: "new", Status: store.StatusCompleted,
		Messages: []store.Message{{Index: 0, Seq: 1}}}); err != nil {
		t.Fatal(err)
	}
	if ms, err := s.Messages(ctx, "new"); err != nil || len(ms) != 1 || !strings.HasPrefix(ms[0].Content, "I'll create") {
		t.Fatalf("turn record by reference after upgrade: %+v, %v", ms, err)
	}
	var n, maxV int
	if err := rawDB(t, path).QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if files, latest := migrationFiles(t); n != files || maxV != latest {
		t.Fatalf("schema_migrations: %d rows up to version %d, want %d up to %d", n, maxV, files, latest)
	}
}

// migrationFiles returns how many migrations there are and the latest
// version: the files' numeric prefixes, which may leave gaps.
func migrationFiles(t *testing.T) (n, latest int) {
	t.Helper()
	ents, err := os.ReadDir("migrations")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		v, err := strconv.Atoi(strings.SplitN(e.Name(), "_", 2)[0])
		if err != nil {
			t.Fatalf("migration %s: %v", e.Name(), err)
		}
		latest = max(latest, v)
	}
	return len(ents), latest
}

// LED-1, LED-2: the writer keeps its runs' last seqs between transactions;
// when another writer of the file (another process, or AppendEvents) has
// appended to one of its runs meanwhile, its events are still checked
// against the ledger one by one: a duplicate fails alone, its neighbours
// of other runs are written, and the run goes on from the ledger's seq.
func TestLED1_WriterCachedSeqsBehindTheLedger(t *testing.T) {
	s, path := openTemp(t)
	other := openPath(t, path) // another process on the same file
	ctx := t.Context()
	w := s.Writer()
	createRuns(t, s, "shared", "mine")
	for seq := int64(1); seq <= 3; seq++ {
		for _, run := range []string{"shared", "mine"} {
			if err := w.Append(ctx, testEvent(run, seq)); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The other writer appends shared/4 behind this writer's back.
	if err := other.Writer().Append(ctx, testEvent("shared", 4)); err != nil {
		t.Fatal(err)
	}
	// This writer, believing shared is at 3, is given shared/4 (a
	// duplicate now) and mine/4 in one batch, then shared/5.
	dup, mine := w.AppendAsync(testEvent("shared", 4)), w.AppendAsync(testEvent("mine", 4))
	if err := <-dup; !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate shared/4: %v, want ErrConflict", err)
	}
	if err := <-mine; err != nil {
		t.Errorf("mine/4 beside the duplicate: %v", err)
	}
	if err := w.Append(ctx, testEvent("shared", 5)); err != nil {
		t.Errorf("shared/5 after the ledger's shared/4: %v", err)
	}
	// A gap is refused though the cache knows the run.
	if err := w.Append(ctx, testEvent("mine", 6)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("gap mine/6 after mine/4: %v, want ErrConflict", err)
	}
	// Alone in its transaction, a duplicate is a conflict too.
	if err := other.Writer().Append(ctx, testEvent("shared", 6)); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, testEvent("shared", 6)); !errors.Is(err, store.ErrConflict) {
		t.Errorf("duplicate shared/6 alone: %v, want ErrConflict", err)
	}
	checkRun(t, s, "shared", 6)
	checkRun(t, s, "mine", 4)

	// AppendEvents leaves the writer to read the run again.
	if err := s.AppendEvents(ctx, []store.Event{testEvent("mine", 5)}); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(ctx, testEvent("mine", 6)); err != nil {
		t.Errorf("mine/6 after AppendEvents' mine/5: %v", err)
	}
	checkRun(t, s, "mine", 6)
}
