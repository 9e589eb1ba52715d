package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// The scale-out proof (DIST-1…3, docs/scale-out.md): three `drover
// worker` processes, each with its own home, config and state directories
// (as if on three hosts), and two `drover serve --queue` processes, on one
// PostgreSQL database; the real Claude CLI against each worker's
// fakemodel.

const scaleScript = `{"rules": [
  {"name": "slow", "match": "(?i)slow", "steps": [{"text": "finally", "delayMs": 120000}]},
  {"name": "medium", "match": "(?i)medium", "steps": [{"text": "after a while", "delayMs": 3000}]},
  {"name": "quick", "match": ".", "steps": [{"text": "done"}]}
]}`

// droverProc is a drover process of the test, killed and waited for at
// cleanup.
type droverProc struct {
	cmd    *exec.Cmd
	stderr *syncBuilder
	waited chan struct{}
}

func startDrover(t *testing.T, bin, dir string, env []string, args ...string) *droverProc {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	sb := &syncBuilder{b: &strings.Builder{}}
	cmd.Stderr = sb
	cmd.Stdout = sb
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &droverProc{cmd: cmd, stderr: sb, waited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.waited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.waited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-p.waited
		}
		if t.Failed() {
			t.Logf("%s:\n%s", strings.Join(args[:1], " "), p.logs())
		}
	})
	return p
}

func (p *droverProc) logs() string {
	p.stderr.mu.Lock()
	defer p.stderr.mu.Unlock()
	return p.stderr.b.String()
}

// waitFor polls cond every 20 ms until it holds or d has passed.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

var servingRE = regexp.MustCompile(`serving HTTP on (http://[0-9.:]+)`)

type apiServer struct {
	t    *testing.T
	base string
}

const scaleToken = "scale-out-test-token"

func (s apiServer) do(method, path string, body any) []byte {
	s.t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, s.base+path, r)
	req.Header.Set("Authorization", "Bearer "+scaleToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

func (s apiServer) start(prompt string) string {
	s.t.Helper()
	var out struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal(s.do("POST", "/v1/runs", map[string]any{"agent": "claude", "prompt": prompt}), &out); err != nil || out.RunID == "" {
		s.t.Fatalf("start: %v %+v", err, out)
	}
	return out.RunID
}

// sseEvent is one event of a run's SSE stream.
type sseEvent struct {
	id   int64
	typ  string
	data string
}

// stream reads run id's SSE stream from server s after seq after, calling
// each for every event until each returns false or the stream ends.
func (s apiServer) stream(ctx context.Context, id string, after int64, each func(sseEvent) bool) {
	s.t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.base+"/v1/runs/"+id+"/stream", nil)
	req.Header.Set("Authorization", "Bearer "+scaleToken)
	if after > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(after, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.typ != "" && !each(ev) {
				return
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.id, _ = strconv.ParseInt(line[4:], 10, 64)
		case strings.HasPrefix(line, "event: "):
			ev.typ = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.data = line[6:]
		}
	}
}

// TestDIST_ScaleOut: 30 runs of the real Claude CLI spread over three
// workers; kill -9 of one worker fails its runs "worker lost" within its
// lease + 10 s while every other run completes; a cancel sent through
// server B stops a run on another worker within 1 s; an SSE client on
// server A follows a run on a worker it never talked to, and resumes after
// a disconnect with no gap or duplicate.
func TestDIST_ScaleOut(t *testing.T) {
	claude := claudeBin(t)
	bin := buildDrover(t)
	db := pgtest.NewDatabase(t)
	root := t.TempDir()
	script := filepath.Join(root, "script.json")
	if err := os.WriteFile(script, []byte(scaleScript), 0o644); err != nil {
		t.Fatal(err)
	}
	workspace := filepath.Join(root, "workspace")
	if err := os.MkdirAll(workspace, 0o755); err != nil {
		t.Fatal(err)
	}
	hostEnv := func(name string) (dir string, env []string) {
		dir = filepath.Join(root, name)
		for _, d := range []string{"home", "config", "state"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		return dir, []string{"HOME=" + filepath.Join(dir, "home"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "DROVER_CLAUDE_BIN=" + claude, "DROVER_DB=" + db}
	}
	const lease = 3 * time.Second
	workers := map[string]*droverProc{}
	for _, name := range []string{"w1", "w2", "w3"} {
		dir, env := hostEnv(name)
		workers[name] = startDrover(t, bin, dir, env, "worker", "--agents", "claude", "--id", name, "--limit", "3",
			"--lease", lease.String(), "--fakemodel-script", script)
	}
	var servers []apiServer
	for _, name := range []string{"serverA", "serverB"} {
		_, env := hostEnv(name)
		p := startDrover(t, bin, workspace, env, "serve", "--queue", "--addr", "127.0.0.1:0", "--token", scaleToken)
		var base string
		waitFor(t, 30*time.Second, name+" serving", func() bool {
			m := servingRE.FindStringSubmatch(p.logs())
			if m != nil {
				base = m[1]
			}
			return m != nil
		})
		servers = append(servers, apiServer{t: t, base: base})
	}
	a, b := servers[0], servers[1]
	st, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	run := func(id string) *store.Run {
		r, err := st.GetRun(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	waitFor(t, 30*time.Second, "three workers registered", func() bool {
		ws, _ := st.Workers(ctx)
		return len(ws) == 3
	})

	// Four slow runs hold four of the nine slots: at least two workers
	// hold one (a worker runs three at most).
	var slow []string
	for i := range 4 {
		slow = append(slow, servers[i%2].start(fmt.Sprintf("slow %d", i)))
	}
	owners := map[string][]string{} // worker → its slow runs
	waitFor(t, 60*time.Second, "the slow runs running", func() bool {
		clear(owners)
		for _, id := range slow {
			r := run(id)
			if r.Status != store.StatusRunning || r.LastSeq < 1 {
				return false
			}
			owners[strings.TrimPrefix(r.Owner, "worker:")] = append(owners[strings.TrimPrefix(r.Owner, "worker:")], id)
		}
		return true
	})
	if len(owners) < 2 {
		t.Fatalf("the slow runs are on %d worker(s): %v", len(owners), owners)
	}
	var victim, other string
	for w := range owners {
		if victim == "" {
			victim = w
		} else if other == "" {
			other = w
		}
	}

	// Server A follows a run on a worker it never talked to (submitted
	// through B), drops after the first event and resumes from its id.
	medium := b.start("medium")
	var seen []int64
	sctx, cancelStream := context.WithTimeout(ctx, 60*time.Second)
	defer cancelStream()
	a.stream(sctx, medium, 0, func(ev sseEvent) bool { seen = append(seen, ev.id); return false })

	// Thirty quick runs through both servers.
	var quick []string
	for i := range 30 {
		quick = append(quick, servers[i%2].start(fmt.Sprintf("quick %d", i)))
	}
	a.stream(sctx, medium, seen[len(seen)-1], func(ev sseEvent) bool { seen = append(seen, ev.id); return true })

	// A cancel through server B reaches a slow run on another worker.
	target := owners[other][0]
	t0 := time.Now()
	b.do("POST", "/v1/runs/"+target+"/cancel", nil)
	waitFor(t, 5*time.Second, "the cancelled run ended", func() bool { return run(target).Status.Terminal() })
	cancelTook := time.Since(t0)
	t.Logf("cancel through server B ended a run on worker %s in %s", other, cancelTook)
	if r := run(target); r.Error != store.ReasonCancelled {
		t.Errorf("cancelled run: %s %q", r.Status, r.Error)
	}
	if cancelTook > time.Second {
		t.Errorf("cancel took %s, more than 1 s", cancelTook)
	}

	// kill -9 of the victim, mid-run.
	killed := time.Now()
	vp := workers[victim]
	if err := vp.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-vp.waited
	for _, id := range owners[victim] {
		waitFor(t, lease+15*time.Second, "the killed worker's run failed", func() bool { return run(id).Status.Terminal() })
		r := run(id)
		if r.Error != "worker lost" {
			t.Errorf("run %s of the killed worker: %s %q", id, r.Status, r.Error)
		}
		if took := r.EndedAt.Sub(killed); took > lease+10*time.Second {
			t.Errorf("run %s failed %s after the kill: more than lease + 10 s", id, took)
		}
		t.Logf("run %s of killed worker %s failed %q %s after kill -9", id, victim, r.Error, r.EndedAt.Sub(killed).Round(time.Millisecond))
	}

	// Every run but the killed worker's completes; the rest of the slow
	// ones are cancelled to end the test.
	for _, id := range slow {
		if r := run(id); !r.Status.Terminal() {
			a.do("POST", "/v1/runs/"+id+"/cancel", nil)
		}
	}
	spread := map[string]int{}
	for _, id := range append(quick, medium) {
		waitFor(t, 3*time.Minute, "run "+id+" ended", func() bool { return run(id).Status.Terminal() })
		r := run(id)
		w := strings.TrimPrefix(r.Owner, "worker:")
		spread[w]++
		switch {
		case r.Status == store.StatusCompleted:
		case w == victim && r.Error == "worker lost":
		default:
			t.Errorf("run %s on %s: %s %q", id, w, r.Status, r.Error)
		}
		evs, err := st.Events(ctx, id, 0, 0)
		if err != nil || int64(len(evs)) != r.LastSeq || (r.Status == store.StatusCompleted && evs[len(evs)-1].Type != "done") {
			t.Errorf("run %s: %d events, last seq %d (%v)", id, len(evs), r.LastSeq, err)
		}
	}
	t.Logf("runs per worker: %v (killed: %s)", spread, victim)
	if len(spread) < 2 {
		t.Errorf("the runs did not spread: %v", spread)
	}

	// drover run --queue on a client host: the run goes to a worker, and
	// every event it prints is in the ledger, in order; drover logs and
	// wait on another host read the same.
	cdir, cenv := hostEnv("client")
	cmd := exec.Command(bin, "run", "--queue", "--json", "--cwd", workspace, "-a", "claude", "quick from the CLI")
	cmd.Dir, cmd.Env = cdir, append(os.Environ(), cenv...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("drover run --queue: %v\n%s", err, out)
	}
	printed := strings.Split(strings.TrimSpace(string(out)), "\n")
	var first struct {
		RunID string `json:"runId"`
	}
	if err := json.Unmarshal([]byte(printed[0]), &first); err != nil || first.RunID == "" {
		t.Fatalf("first line %q: %v", printed[0], err)
	}
	cr := run(first.RunID)
	recorded, err := st.Events(ctx, first.RunID, 0, 0)
	if err != nil || cr.Status != store.StatusCompleted || !strings.HasPrefix(cr.Owner, "worker:") || len(recorded) != len(printed) {
		t.Fatalf("run --queue: %s owner %q, printed %d events, recorded %d (%v)", cr.Status, cr.Owner, len(printed), len(recorded), err)
	}
	for i, ev := range recorded {
		if strings.TrimSpace(string(ev.JSON)) != printed[i] {
			t.Fatalf("event %d printed %s, recorded %s", i+1, printed[i], ev.JSON)
		}
	}
	wc := exec.Command(bin, "workers")
	wc.Dir, wc.Env = cdir, append(os.Environ(), cenv...)
	wout, err := wc.CombinedOutput()
	if err != nil || !regexp.MustCompile(`(?m)^`+victim+`\s.*\slost\s`).Match(wout) {
		t.Errorf("drover workers (%v) does not show %s lost:\n%s", err, victim, wout)
	}
	for _, args := range [][]string{{"wait", first.RunID}, {"logs", first.RunID}} {
		c := exec.Command(bin, args...)
		c.Dir, c.Env = cdir, append(os.Environ(), cenv...)
		if out, err := c.CombinedOutput(); err != nil {
			t.Errorf("drover %s: %v\n%s", args[0], err, out)
		}
	}

	// The SSE client saw the run on a worker it never talked to, whole:
	// every seq once, in order, through the reconnect.
	mr := run(medium)
	if mr.Status != store.StatusCompleted || int64(len(seen)) != mr.LastSeq {
		t.Fatalf("SSE on server A saw seqs %v of run %s (%s, last seq %d)", seen, medium, mr.Status, mr.LastSeq)
	}
	for i, s := range seen {
		if s != int64(i+1) {
			t.Fatalf("SSE seqs %v: a gap or duplicate at %d", seen, i)
		}
	}
}
