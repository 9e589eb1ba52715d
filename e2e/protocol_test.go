package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/store"
)

// TestPRO1_ServeStdioChildProcess speaks the JSON-lines protocol to a
// `drover serve --stdio` child process driving the real claude CLI against
// fakemodel: two runs, a subscription to all runs, one run cancelled, both
// awaited (PRO-1, PRO-2, RUN-1…RUN-3).
func TestPRO1_ServeStdioChildProcess(t *testing.T) {
	bin := claudeBin(t)
	droverBin := buildDrover(t)
	script, err := fakemodel.ParseScript([]byte(`{"rules":[
		{"match":"take your time","steps":[{"text":"this answer takes a long time","delayMs":120000}]},
		{"match":"","steps":[{"text":"hello from fakemodel"}]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	fm := fakemodel.New(script)
	url, err := fm.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fm.Close() })

	home := t.TempDir()
	// The runs name the pinned binary and a home of their own: options
	// only the server's operator may allow (SEC-5).
	cmd := exec.Command(droverBin, "serve", "--stdio", "--allow-autonomous", "--db", filepath.Join(home, "drover.db"))
	cmd.Env = append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
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
	c := protocol.NewClient(stdout, stdin)
	exited := false
	t.Cleanup(func() {
		c.Close()
		if !exited {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	sub, err := c.Subscribe(ctx, protocol.SubscribeParams{All: true})
	if err != nil {
		t.Fatal(err)
	}
	zero := 0
	opts := func(name string) *drover.Options {
		dir := filepath.Join(t.TempDir(), name)
		return &drover.Options{
			Binary: bin, Cwd: t.TempDir(), Tier: drover.TierSupervised, Timeout: 2 * time.Minute,
			Endpoint:   &drover.Endpoint{BaseURL: url, APIKey: "sk-protocol"},
			APIRetries: &zero, ConfigDir: filepath.Join(dir, "config"),
			Env: map[string]string{"HOME": dir, "XDG_CONFIG_HOME": filepath.Join(dir, ".config")},
		}
	}
	fast, err := c.Run(ctx, api.RunParams{Agent: "claude", Prompt: "say hello", Options: opts("fast")})
	if err != nil {
		t.Fatal(err)
	}
	slow, err := c.Run(ctx, api.RunParams{Agent: "claude", Prompt: "take your time", Options: opts("slow")})
	if err != nil {
		t.Fatal(err)
	}

	// Follow both runs; cancel the slow one once it has started (its init
	// event arrived) and the model is answering it.
	seqs := map[string]int64{}
	dones := map[string]drover.DonePayload{}
	cancelled := false
	for len(dones) < 2 {
		var ev protocol.Event
		select {
		case e, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended early; drover stderr:\n%s", stderr.String())
			}
			ev = e
		case <-ctx.Done():
			t.Fatalf("timed out with done events %v; drover stderr:\n%s", dones, stderr.String())
		}
		if ev.Lagged != nil || ev.Synced != nil {
			continue
		}
		e := ev.Event
		if e.RunID != fast.RunID && e.RunID != slow.RunID {
			t.Fatalf("event of an unknown run: %s", ev.Raw)
		}
		if e.Seq != seqs[e.RunID]+1 {
			t.Fatalf("run %s: seq %d after %d", e.RunID, e.Seq, seqs[e.RunID])
		}
		seqs[e.RunID] = e.Seq
		if e.RunID == slow.RunID && e.Type == drover.TypeInit && !cancelled {
			time.Sleep(500 * time.Millisecond) // let the CLI send its request
			if _, err := c.Cancel(ctx, api.RunIDParams{RunID: slow.RunID}); err != nil {
				t.Fatal(err)
			}
			cancelled = true
		}
		if d, ok := e.Done(); ok {
			dones[e.RunID] = d
		}
	}
	if d := dones[fast.RunID]; d.Status != drover.StatusSuccess {
		t.Errorf("fast run done %+v", d)
	}
	if d := dones[slow.RunID]; d.Status != drover.StatusInterrupted {
		t.Errorf("slow run done %+v", d)
	}

	aw, err := c.Await(ctx, api.AwaitParams{Runs: []string{fast.RunID, slow.RunID}})
	if err != nil {
		t.Fatal(err)
	}
	rs := aw.Runs
	if rs[0].Status != store.StatusCompleted || rs[1].Status != store.StatusFailed || rs[1].Error != store.ReasonCancelled {
		t.Fatalf("await: %+v / %+v", rs[0], rs[1])
	}
	got, err := c.Get(ctx, api.GetParams{RunID: fast.RunID})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(got.Messages); n < 2 || got.Messages[n-1].Content != "hello from fakemodel" {
		t.Errorf("turn record %+v", got.Messages)
	}

	// End of input: drover exits 0.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	select {
	case err := <-waited:
		exited = true
		if err != nil {
			t.Fatalf("drover serve exited with %v; stderr:\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("drover serve did not exit after the end of its input")
	}
}
