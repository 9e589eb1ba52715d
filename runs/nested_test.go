package runs_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// nestedProbeEnv makes this test binary the program a contained run
// starts: it dials $DROVER_SOCKET, sends $DROVER_RUN_TOKEN (or the
// variable's value, when not "1") as one line, and prints the line it
// gets back.
const nestedProbeEnv = "RUNS_NESTED_PROBE"

// init, not TestMain (which another file owns): the probe has to run
// before the tests would, in a binary the contain launcher exec'd.
func init() {
	v, ok := os.LookupEnv(nestedProbeEnv)
	if !ok {
		return
	}
	token := os.Getenv(runs.EnvRunToken)
	if v != "1" {
		token = v
	}
	conn, err := net.Dial("unix", os.Getenv(runs.EnvSocket))
	if err != nil {
		fmt.Println("dial:", err)
		os.Exit(0)
	}
	fmt.Fprintln(conn, token)
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		fmt.Println("read:", err)
		os.Exit(0)
	}
	fmt.Print(line)
	os.Exit(0)
}

// echoToken is a nested handler that answers the first line, a token,
// with "run ID" for a token of a run going on, else "refused".
func echoToken(sup *runs.Supervisor) runs.NestedHandler {
	return func(_ context.Context, conn net.Conn) {
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil {
			return
		}
		if id, ok := sup.TokenRun(strings.TrimSpace(line)); ok {
			fmt.Fprintln(conn, "run", id)
			return
		}
		fmt.Fprintln(conn, "refused")
	}
}

// probeAgent runs the probe, contained as a supervised vendor CLI would
// be (writes only in its workspace, reads only there and the system's
// directories, its own TMPDIR and HOME), with the environment the
// supervisor gave the run plus extra, and reports what it printed.
func probeAgent(t *testing.T, ws string) *agenttest.Agent {
	return &agenttest.Agent{Name: "probe", Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		exe, err := os.Executable()
		if err != nil {
			y(drover.Event{}, err)
			return
		}
		launcher, entry, err := contain.Command(contain.Policy{Write: []string{ws}, Read: []string{ws}}, exe)
		if err != nil {
			y(drover.Event{}, err)
			return
		}
		cmd := exec.CommandContext(ctx, launcher)
		cmd.Args = []string{exe}
		cmd.Env = append(os.Environ(), entry, "TMPDIR="+filepath.Join(ws, "tmp"), "HOME="+filepath.Join(ws, "home"),
			"GORACE=atexit_sleep_ms=0", nestedProbeEnv+"="+req.Prompt)
		for k, v := range req.Options.Env {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.Output()
		if err != nil {
			y(drover.Event{}, fmt.Errorf("probe: %w", err))
			return
		}
		if y(text(strings.TrimSpace(string(out))), nil) {
			y(done(""), nil)
		}
	}}
}

// TestMCP1_NestedSocketReachedFromAContainedRun: a supervisor serving
// nested runs gives each run DROVER_SOCKET and a token of its own; a
// process contained like a supervised vendor CLI (Landlock write and read
// boundary around its workspace, its own TMPDIR and HOME) reaches the
// socket and is known by its token as that run; another token is
// refused; the token ends with the run and is nowhere in the ledger;
// Close removes the socket and its directory.
func TestMCP1_NestedSocketReachedFromAContainedRun(t *testing.T) {
	if err := contain.Available(); err != nil {
		t.Skipf("this kernel cannot contain: %v", err)
	}
	t.Logf("Landlock ABI %d", contain.ABI())
	ws := t.TempDir()
	for _, d := range []string{"tmp", "home"} {
		if err := os.Mkdir(filepath.Join(ws, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	st := openStore(t, filepath.Join(t.TempDir(), "drover.db"))
	reg := drover.NewRegistry()
	if err := reg.Register(probeAgent(t, ws)); err != nil {
		t.Fatal(err)
	}
	var tokens []string
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer sup.Close()
	sock, err := sup.ServeNested(echoToken(sup))
	if err != nil {
		t.Fatal(err)
	}
	if sup.NestedSocket() != sock {
		t.Fatalf("NestedSocket %q, ServeNested said %q", sup.NestedSocket(), sock)
	}
	if fi, err := os.Stat(filepath.Dir(sock)); err != nil || fi.Mode().Perm() != 0o700 || contain.Within(sock, ws) {
		t.Fatalf("socket %s: directory %v %v", sock, fi.Mode(), err)
	}
	if _, err := sup.ServeNested(echoToken(sup)); err == nil {
		t.Fatal("a second ServeNested was accepted")
	}

	ctx := context.Background()
	run := func(prompt string) *store.Run {
		t.Helper()
		s, err := sup.Start(ctx, runs.StartRequest{Agent: "probe", Prompt: prompt, Options: drover.Options{Cwd: ws}})
		if err != nil {
			t.Fatal(err)
		}
		rs, err := sup.Await(ctx, s.RunID)
		if err != nil {
			t.Fatal(err)
		}
		return rs[0]
	}
	lastText := func(r *store.Run) string {
		t.Helper()
		msgs, err := st.Messages(ctx, r.ID)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("run %s (%s %s): messages %v %v", r.ID, r.Status, r.Error, msgs, err)
		}
		return msgs[len(msgs)-1].Content
	}
	r := run("1")
	if got := lastText(r); got != "run "+r.ID {
		t.Fatalf("the contained probe with its run's token got %q, want %q", got, "run "+r.ID)
	}
	if got := lastText(run("0123456789abcdef")); got != "refused" {
		t.Fatalf("a made-up token got %q", got)
	}

	// The token: 256 bits, never recorded, gone with its run.
	var seen []string
	reg2 := drover.NewRegistry()
	_ = reg2.Register(&agenttest.Agent{Name: "env", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		seen = append(seen, req.Options.Env[runs.EnvRunToken])
		if y(text("token seen"), nil) {
			y(done(""), nil)
		}
	}})
	sup2, err := runs.New(ctx, engine.New(reg2), st, runs.Config{Owner: "second"})
	if err != nil {
		t.Fatal(err)
	}
	defer sup2.Close()
	sock2, err := sup2.ServeNested(echoToken(sup2))
	if err != nil {
		t.Fatal(err)
	}
	s2, err := sup2.Start(ctx, runs.StartRequest{Agent: "env", Prompt: "p", Options: drover.Options{Cwd: ws}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sup2.Await(ctx, s2.RunID); err != nil {
		t.Fatal(err)
	}
	tokens = append(tokens, seen...)
	if len(tokens) != 1 || len(tokens[0]) != 64 {
		t.Fatalf("tokens %q", tokens)
	}
	if _, ok := sup2.TokenRun(tokens[0]); ok {
		t.Error("the token of an ended run is still known")
	}
	if _, ok := sup.TokenRun(tokens[0]); ok {
		t.Error("a supervisor knows another's token")
	}
	evs, err := st.Events(ctx, s2.RunID, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := st.GetRun(ctx, s2.RunID)
	if err != nil {
		t.Fatal(err)
	}
	all := string(rec.Options)
	for _, ev := range evs {
		all += string(ev.JSON)
	}
	if strings.Contains(all, tokens[0]) {
		t.Error("the ledger records the run's token")
	}

	sup.Close()
	sup2.Close()
	for _, p := range []string{sock, filepath.Dir(sock), sock2, filepath.Dir(sock2)} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s is left after Close: %v", p, err)
		}
	}
	if _, err := sup.ServeNested(echoToken(sup)); err == nil {
		t.Error("ServeNested on a closed supervisor was accepted")
	}
}

// TestMCP1_NestedCloseEndsConnections: Close ends a handler blocked on
// its connection and waits for it.
func TestMCP1_NestedCloseEndsConnections(t *testing.T) {
	st := openStore(t, filepath.Join(t.TempDir(), "drover.db"))
	sup, err := runs.New(context.Background(), engine.New(drover.NewRegistry()), st, runs.Config{})
	if err != nil {
		t.Fatal(err)
	}
	entered, returned := make(chan struct{}), make(chan struct{})
	sock, err := sup.ServeNested(func(_ context.Context, conn net.Conn) {
		close(entered)
		_, _ = bufio.NewReader(conn).ReadString('\n') // blocks until Close closes conn
		close(returned)
	})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never got the connection")
	}
	sup.Close()
	select {
	case <-returned:
	default:
		t.Fatal("Close returned before the handler")
	}
	if _, err := net.Dial("unix", sock); err == nil {
		t.Error("the socket still accepts after Close")
	}
}
