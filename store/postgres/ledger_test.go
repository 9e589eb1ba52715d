package postgres_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// open opens the ledger at u and closes it when t ends.
func open(t testing.TB, u string, opts ...postgres.Option) *postgres.Store {
	t.Helper()
	s, err := postgres.Open(context.Background(), u, opts...)
	if err == nil {
		t.Cleanup(func() { s.Close() })
		return s
	}
	t.Fatalf("Open(%s): %v", u, err)
	return nil
}

// conn is a plain connection to u, independent of any Store.
func conn(t *testing.T, u string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// ev is the seq-th event of run, about 300 bytes of drover-shaped JSON.
func ev(run string, seq int64) store.Event {
	js := fmt.Sprintf(`{"type":"text","agent":"claude","timestamp":1773500966535,"sessionId":"5f0c4b1e-3a43-4c1e-9d5e-0a6f2b8e7c11",`+
		`"payload":{"content":"Step %d: I'll create hello.txt with the requested content, then list the directory."},`+
		`"metadata":{"vendor":"claude"},"runId":%q,"seq":%d}`, seq, run, seq)
	return store.Event{RunID: run, Seq: seq, Type: drover.TypeText, JSON: json.RawMessage(js), Time: time.UnixMicro(1773500966535000 + seq)}
}

// mkRuns creates runs ids in s.
func mkRuns(t testing.TB, s store.Store, ids ...string) {
	t.Helper()
	var errs []error
	for _, id := range ids {
		errs = append(errs, s.CreateRun(context.Background(), &store.Run{ID: id, Agent: "claude", Prompt: "p"}))
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

// seqsOf asserts that run has exactly the events 1..n in s.
func seqsOf(t *testing.T, s store.Store, run string, n int) {
	t.Helper()
	evs, err := s.Events(t.Context(), run, 0, 0)
	got, want := make([]int64, len(evs)), make([]int64, n)
	for i := range got {
		got[i] = evs[i].Seq
	}
	for i := range want {
		want[i] = int64(i + 1)
	}
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("%s: seqs %v (%v), want 1..%d", run, got, err, n)
	}
}

// LED-6: several processes opening one new database at once all succeed,
// and each migration is applied once.
func TestLED6_ConcurrentOpen(t *testing.T) {
	u := pgtest.NewDatabase(t)
	const openers = 6
	var wg sync.WaitGroup
	for i := range openers {
		wg.Go(func() {
			s, err := postgres.Open(t.Context(), u)
			if err != nil {
				t.Errorf("opener %d: %v", i, err)
				return
			}
			defer s.Close()
			if err := s.CreateRun(t.Context(), &store.Run{ID: fmt.Sprint("r", i), Agent: "claude"}); err != nil {
				t.Errorf("opener %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	s := open(t, u)
	if rs, err := s.ListRuns(t.Context(), store.RunFilter{}); err != nil || len(rs) != openers {
		t.Fatalf("%d runs, %v; want %d", len(rs), err, openers)
	}
	var n, maxV int
	if err := conn(t, u).QueryRow(t.Context(), `SELECT COUNT(*), MAX(version) FROM drover_migrations`).Scan(&n, &maxV); err != nil {
		t.Fatal(err)
	}
	if n != maxV || n == 0 {
		t.Fatalf("drover_migrations has %d rows up to version %d", n, maxV)
	}
}

// LED-6: ExistingOnly opens a ledger but creates none; a database
// migrated by a newer drover is refused, not damaged.
func TestLED6_SchemaVersions(t *testing.T) {
	u := pgtest.NewDatabase(t)
	c := conn(t, u)
	for i, step := range []struct {
		sql  string // run first
		opts []postgres.Option
		want string // in Open's error; "" for success
		tabs int    // tables there after
	}{
		{"", []postgres.Option{postgres.ExistingOnly()}, "no drover ledger in this database", 0},
		{"", nil, "", 12},
		{"", []postgres.Option{postgres.ExistingOnly()}, "", 12},
		{`INSERT INTO drover_migrations (version, name) VALUES (9999, '9999_future.sql')`, nil, "newer than this drover knows", 12},
	} {
		if step.sql != "" {
			if _, err := c.Exec(t.Context(), step.sql); err != nil {
				t.Fatal(err)
			}
		}
		s, err := postgres.Open(t.Context(), u, step.opts...)
		if err == nil {
			s.Close()
		}
		if (err == nil) != (step.want == "") || (err != nil && !strings.Contains(err.Error(), step.want)) {
			t.Fatalf("step %d: Open: %v, want %q", i, err, step.want)
		}
		var tabs int
		if err := c.QueryRow(t.Context(), `SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'`).Scan(&tabs); err != nil || tabs != step.tabs {
			t.Fatalf("step %d: %d tables (%v), want %d", i, tabs, err, step.tabs)
		}
	}
}

// LED-2: the cursor is commit order. An appender waits while another
// transaction holds the events lock, so the follower never sees its later
// cursor before the earlier one has committed; then it sees both, in
// order.
func TestLED2_CursorWaitsForEarlierCommit(t *testing.T) {
	u := pgtest.NewDatabase(t)
	s := open(t, u)
	ctx := t.Context()
	mkRuns(t, s, "early", "late", "later")
	tx, err := conn(t, u).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, postgres.LockEvents); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO events (run_id, seq, type, data) VALUES ('early', 1, 'text', '{}')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.AppendEvents(ctx, []store.Event{ev("late", 1)}) }()
	late := s.AppendAsync(ev("later", 1)) // the batched writer waits too
	select {
	case err := <-done:
		t.Fatalf("AppendEvents committed (%v) while an earlier appender held the events lock", err)
	case err := <-late:
		t.Fatalf("the writer committed (%v) while an earlier appender held the events lock", err)
	case <-time.After(300 * time.Millisecond):
	}
	if evs, err := s.EventsAfter(ctx, 0, 0); err != nil || len(evs) != 0 {
		t.Fatalf("follower saw %d events before the first commit: %v", len(evs), err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(<-done, <-late); err != nil {
		t.Fatal(err)
	}
	evs, err := s.EventsAfter(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i, e := range evs {
		got = append(got, fmt.Sprintf("%s/%d", e.RunID, e.Seq))
		if i > 0 && e.Cursor <= evs[i-1].Cursor {
			t.Fatalf("cursors %d then %d", evs[i-1].Cursor, e.Cursor)
		}
	}
	if len(got) != 3 || got[0] != "early/1" || !strings.Contains(strings.Join(got, " "), "late/1") || !strings.Contains(strings.Join(got, " "), "later/1") {
		t.Fatalf("EventsAfter gave %v", got)
	}
}

// LED-2, LED-6: three Stores (three processes, as the database sees them)
// record through their batched writers at once while a fourth follows
// EventsAfter: it sees every event once, each run's in seq order.
func TestLED6_SharedLedgerFollow(t *testing.T) {
	u := pgtest.NewDatabase(t)
	follower := open(t, u)
	ctx := t.Context()
	const stores, runsEach, perRun = 3, 4, 150
	var wg sync.WaitGroup
	for p := range stores {
		s := open(t, u)
		for r := range runsEach {
			run := fmt.Sprintf("p%d-r%d", p, r)
			mkRuns(t, s, run)
			wg.Go(func() {
				var pending []<-chan error
				for seq := int64(1); seq <= perRun; seq++ {
					pending = append(pending, s.AppendAsync(ev(run, seq)))
				}
				for _, c := range pending {
					if err := <-c; err != nil {
						t.Errorf("%s: %v", run, err)
						return
					}
				}
			})
		}
	}
	last := map[string]int64{}
	var cursor int64
	total := 0
	for deadline := time.Now().Add(time.Minute); total < stores*runsEach*perRun && time.Now().Before(deadline); {
		evs, err := follower.EventsAfter(ctx, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Cursor <= cursor || e.Seq != last[e.RunID]+1 {
				t.Fatalf("%s/%d at cursor %d after cursor %d and seq %d", e.RunID, e.Seq, e.Cursor, cursor, last[e.RunID])
			}
			cursor, last[e.RunID] = e.Cursor, e.Seq
			total++
		}
		if len(evs) == 0 {
			time.Sleep(time.Millisecond)
		}
	}
	wg.Wait()
	if total != stores*runsEach*perRun {
		t.Fatalf("the follower saw %d events of %d", total, stores*runsEach*perRun)
	}
}

// LED-1 on PostgreSQL: the batched writer group-commits a burst, checks
// each event on its own, retries alone an event that fails its whole
// transaction, and flushes on Close.
func TestLED6_Writer(t *testing.T) {
	u := pgtest.NewDatabase(t)
	s, err := postgres.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	mkRuns(t, s, "burst", "a", "b", "p")
	if _, err := conn(t, u).Exec(t.Context(), `CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS
		$$ BEGIN IF NEW.type = 'poison' THEN RAISE EXCEPTION 'poisoned event'; END IF; RETURN NEW; END $$;
		CREATE TRIGGER poison BEFORE INSERT ON events FOR EACH ROW EXECUTE FUNCTION poison()`); err != nil {
		t.Fatal(err)
	}
	const burst = 2000
	var res []<-chan error
	for seq := int64(1); seq <= burst; seq++ {
		res = append(res, s.AppendAsync(ev("burst", seq)))
	}
	for i, c := range res {
		if err := <-c; err != nil {
			t.Fatalf("burst %d: %v", i+1, err)
		}
	}
	st := s.WriterStats()
	if st.Events != burst || st.Commits > burst/10 {
		t.Errorf("writer: %+v for a burst of %d events", st, burst)
	}
	t.Logf("burst: %+v", st)

	// Queued back to back, so they usually share a transaction; the
	// outcome must be the same either way. The poisoned one fails the
	// transaction: the others are retried one by one.
	res = res[:0]
	bad := ev("p", 1)
	bad.Type = "poison"
	mixed := []store.Event{ev("a", 1), ev("a", 3), ev("nope", 1), ev("b", 1), bad, ev("a", 2), ev("a", 2), ev("b", 2)}
	want := []error{nil, store.ErrConflict, store.ErrNotFound, nil, errors.New("poisoned event"), nil, store.ErrConflict, nil}
	for _, e := range mixed {
		res = append(res, s.AppendAsync(e))
	}
	if err := s.Close(); err != nil { // flushes what was queued
		t.Fatal(err)
	}
	for i, c := range res {
		err, w := <-c, want[i]
		switch {
		case w == nil && err != nil, w != nil && err == nil,
			w != nil && !errors.Is(err, w) && !strings.Contains(fmt.Sprint(err), w.Error()):
			t.Errorf("event %d: got %v, want %v", i, err, w)
		}
	}
	if st := s.WriterStats(); st.Events != burst+4 {
		t.Errorf("writer: %+v, want %d events", st, burst+4)
	}
	if err := <-s.AppendAsync(ev("a", 3)); !errors.Is(err, postgres.ErrClosed) {
		t.Errorf("AppendAsync after Close: %v", err)
	}
	r := open(t, u)
	seqsOf(t, r, "burst", burst)
	seqsOf(t, r, "a", 2)
	seqsOf(t, r, "b", 2)
	seqsOf(t, r, "p", 0)
}

// LED-2: event JSON comes back byte for byte whatever it holds (bytea),
// with microsecond times.
func TestLED6_EventBytes(t *testing.T) {
	s := open(t, pgtest.NewDatabase(t))
	mkRuns(t, s, "r")
	raw := []byte("{\"type\":\"x:y\",\"payload\":{\"s\":\"\xff\xfe not UTF-8 \\u0000\"}, \"pad\" :  1 }")
	at := time.Date(2026, 3, 14, 15, 9, 26, 535897000, time.FixedZone("x", 3600))
	if err := s.AppendEvents(t.Context(), []store.Event{{RunID: "r", Seq: 1, Type: "x:y", JSON: raw, Time: at}}); err != nil {
		t.Fatal(err)
	}
	evs, err := s.Events(t.Context(), "r", 0, 0)
	if err != nil || len(evs) != 1 {
		t.Fatalf("%v %v", evs, err)
	}
	if string(evs[0].JSON) != string(raw) || !evs[0].Time.Equal(at) || evs[0].Type != "x:y" {
		t.Fatalf("got %q %v %s", evs[0].JSON, evs[0].Time, evs[0].Type)
	}
}

// Open's errors say what to check, and never show the password.
func TestOpenErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there now
	server, err := url.Parse(pgtest.ServerURL(t))
	if err != nil {
		t.Fatal(err)
	}
	missing := *server
	missing.Path = "/drover_no_such_database"
	for _, tc := range []struct{ url, want string }{
		{fmt.Sprintf("postgres://drover:s3cr3t-pw@127.0.0.1:%d/ledger", port), "connection refused (is the server running there?"},
		{missing.String(), "no database drover_no_such_database: create it (createdb drover_no_such_database)"},
		{"postgres://drover:s3cr3t-pw@127.0.0.1:notaport/x", "postgres ledger"},
	} {
		s, err := postgres.Open(t.Context(), tc.url)
		if err == nil {
			s.Close()
			t.Fatalf("Open(%s) succeeded", tc.url)
		}
		if !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "s3cr3t-pw") {
			t.Errorf("Open(%s): %v\nwant it to say %q, without the password", tc.url, err, tc.want)
		}
	}
}
