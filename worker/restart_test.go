package worker_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/worker"
)

// cluster is a PostgreSQL server of the test's own, which it may restart
// (the shared test server must not be).
type cluster struct {
	t    *testing.T
	bin  string
	data string
	as   []string // run as this user (initdb refuses root)
}

func (c *cluster) pgctl(args ...string) {
	c.t.Helper()
	cmd := exec.Command(c.as[0], append(c.as[1:], append([]string{filepath.Join(c.bin, "pg_ctl"), "-D", c.data}, args...)...)...)
	// A file, not a pipe: the server pg_ctl starts inherits its output,
	// and a pipe would keep the command from ever being done.
	out, err := os.CreateTemp("", "pg_ctl-*.log")
	if err != nil {
		c.t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Run(); err != nil {
		b, _ := os.ReadFile(out.Name())
		c.t.Fatalf("pg_ctl %v: %v\n%s", args, err, b)
	}
}

// newCluster starts a throwaway server on a free port and returns it and
// its URL; it is stopped when t ends. Without PostgreSQL's server
// binaries the test is skipped, saying so.
func newCluster(t *testing.T) (*cluster, string) {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		t.Skip("no PostgreSQL server binaries (/usr/lib/postgresql/*/bin): this test restarts a server of its own")
	}
	c := &cluster{t: t, bin: filepath.Dir(bins[len(bins)-1]), as: []string{"env"}}
	dir, err := os.MkdirTemp("", "drover-pg-restart-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: cannot run initdb")
		}
		_ = os.Chmod(dir, 0o755)
		if out, err := exec.Command("chown", u.Username, dir).CombinedOutput(); err != nil {
			t.Fatalf("chown: %v %s", err, out)
		}
		c.as = []string{"runuser", "-u", u.Username, "--"}
	}
	c.data = filepath.Join(dir, "data")
	cmd := exec.Command(c.as[0], append(c.as[1:], filepath.Join(c.bin, "initdb"), "-D", c.data, "-U", "postgres", "-A", "trust", "--no-sync")...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	c.pgctl("-l", filepath.Join(dir, "server.log"), "-w", "-t", "60", "-o",
		fmt.Sprintf("-c port=%d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off", port, dir), "start")
	t.Cleanup(func() { c.pgctl("-m", "immediate", "-w", "stop") })
	return c, fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres", port)
}

// TestDIST_DatabaseRestartUnderLoad: the database restarts while runs
// record: workers and clients reconnect, every run in flight either
// completes or fails with a clear reason, runs queued afterwards
// complete, and nothing recorded is lost (every run's events are there,
// seq 1 to its last, none missing).
func TestDIST_DatabaseRestartUnderLoad(t *testing.T) {
	pg, url := newCluster(t)
	st := open(t, url)
	sup := client(t, st)
	for _, id := range []string{"r1", "r2"} {
		startWorker(t, url, worker.Config{ID: id, Agents: []string{"echo", "ticker"}, Lease: 10 * time.Second})
	}
	ctx := context.Background()
	var inFlight []string
	for range 6 {
		s, err := sup.Start(ctx, runs.StartRequest{Agent: "ticker", Prompt: "tick"})
		if err != nil {
			t.Fatal(err)
		}
		inFlight = append(inFlight, s.RunID)
	}
	for _, id := range inFlight {
		waitStatus(t, st, id, store.StatusRunning)
	}
	time.Sleep(300 * time.Millisecond) // events are being recorded
	pg.pgctl("-m", "fast", "-w", "-t", "60", "restart")

	var after []string
	for range 4 {
		var s runs.Started
		var err error
		for range 40 { // the pool's first use after the restart may meet a dead connection
			if s, err = sup.Start(ctx, runs.StartRequest{Agent: "echo", Prompt: "after"}); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		after = append(after, s.RunID)
	}
	for _, r := range await(t, sup, after...) {
		if r.Status != store.StatusCompleted {
			t.Errorf("run %s queued after the restart: %s %q", r.ID, r.Status, r.Error)
		}
	}
	for _, r := range await(t, sup, inFlight...) {
		switch {
		case r.Status == store.StatusCompleted:
		case r.Error == worker.ReasonLedgerUnavailable, strings.HasPrefix(r.Error, "ledger"):
		default:
			t.Errorf("run %s in flight: %s %q: want completed or a ledger reason", r.ID, r.Status, r.Error)
		}
		evs, err := st.Events(ctx, r.ID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			if ev.Seq != int64(i+1) {
				t.Fatalf("run %s: event %d has seq %d", r.ID, i, ev.Seq)
			}
		}
		if int64(len(evs)) != r.LastSeq {
			t.Errorf("run %s: %d events, last seq %d", r.ID, len(evs), r.LastSeq)
		}
		t.Logf("run %s: %s %q, %d events", r.ID, r.Status, r.Error, len(evs))
	}
}
