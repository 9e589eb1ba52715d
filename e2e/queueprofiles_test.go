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
	"github.com/drover-run/drover/store/postgres"
	"github.com/drover-run/drover/store/postgres/pgtest"
)

// TestFAIL1_QueuedProfilesAndCooldownsAcrossWorkers: a run queued with
// --profile a,b names profiles; each worker runs them with its own
// credentials of those names; the client needs none.
// Worker one finds profile a rate limited (the real claude against its
// fakemodel) and switches to b; a second run, on worker two, skips a at
// once: the cooldown is shared through the PostgreSQL ledger.
func TestFAIL1_QueuedProfilesAndCooldownsAcrossWorkers(t *testing.T) {
	bin, claude := buildDrover(t), claudeBin(t)
	db := pgtest.NewDatabase(t)
	root := t.TempDir()
	script := filepath.Join(root, "script.json")
	if err := os.WriteFile(script, []byte(failoverScript), 0o600); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(root, "ws")
	if err := os.MkdirAll(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	const keyA, keyB = "sk-test-profile-a-0001", "sk-test-profile-b-0002" // the workers'; the script limits keyA
	host := func(name, a, b string) (dir string, env []string) {
		dir = filepath.Join(root, name)
		env = []string{"HOME=" + filepath.Join(dir, "home"), "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"),
			"XDG_STATE_HOME=" + filepath.Join(dir, "state"), "DROVER_CLAUDE_BIN=" + claude, "DROVER_DB=" + db,
			"KEY_A=" + a, "KEY_B=" + b}
		for _, d := range []string{"home", "config", "state"} {
			if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []string{"a", "b"} {
			if a == "" {
				break // a host without profiles
			}
			cmd := exec.Command(bin, "profiles", "add", p, "--agent", "claude", "--from-env", "ANTHROPIC_API_KEY=KEY_"+strings.ToUpper(p))
			cmd.Env = append(os.Environ(), env...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("profiles add on %s: %v\n%s", name, err, out)
			}
		}
		return dir, env
	}
	logs := map[string]string{}
	for _, name := range []string{"one", "two"} {
		dir, env := host(name, keyA, keyB)
		logs[name] = filepath.Join(dir, "requests.jsonl")
		startDrover(t, bin, dir, env, "worker", "--agents", "claude", "--id", name, "--labels", name,
			"--fakemodel-script", script, "--fakemodel-log", logs[name])
	}
	// The client has no profiles: it names them, the workers hold them.
	_, clientEnv := host("client", "", "")
	st, err := postgres.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	waitFor(t, 30*time.Second, "two workers registered", func() bool {
		w, _ := st.Workers(context.Background())
		return len(w) == 2
	})
	run := func(label string) []drover.Event {
		t.Helper()
		cmd := exec.Command(bin, "run", "--queue", "--json", "--labels", label, "--cwd", ws, "--tier", "dry-run",
			"-a", "claude", "--profile", "a,b", "say hello")
		cmd.Env = append(os.Environ(), clientEnv...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("drover run --queue --labels %s: %v\n%s", label, err, stderr.String())
		}
		evs := decodeLines(t, string(out))
		if d := doneOf(t, evs); d.Status != drover.StatusSuccess || d.Result != "hello from the next link" {
			t.Fatalf("run on worker %s: done %+v", label, d)
		}
		return evs
	}

	first := run("one")
	att := attemptsIn(t, first)
	if len(att) != 2 || att[0]["profile"] != "a" || att[0]["code"] != "RATE_LIMITED" || att[1]["profile"] != "b" {
		t.Errorf("worker one's attempts %v, want a rate limited, then b", att)
	}
	if reqs := readRequestLog(t, logs["one"]); len(reqs) != 2 || reqs[0].Rule != "limited" || reqs[1].Rule != "hello" {
		t.Errorf("worker one's model requests %+v: profile a should have been its own key A", reqs)
	}
	second := run("two")
	if att := attemptsIn(t, second); len(att) != 1 || att[0]["profile"] != "b" {
		t.Errorf("worker two's attempts %v: profile a, cooled by worker one, should be skipped", att)
	}
	if n := len(recoverableErrors(second)); n != 0 {
		t.Errorf("worker two switched %d times", n)
	}
	if reqs := readRequestLog(t, logs["two"]); len(reqs) != 1 || reqs[0].Rule != "hello" {
		t.Errorf("worker two's model requests %+v", reqs)
	}
	var leaked int
	err = st.Pool().QueryRow(context.Background(), `SELECT
		(SELECT count(*) FROM runs WHERE options::text ~ 'sk-test-')
		+ (SELECT count(*) FROM events WHERE convert_from(data, 'UTF8') ~ 'sk-test-')`).Scan(&leaked)
	if err != nil || leaked != 0 {
		t.Errorf("the ledger holds %d rows with a key (%v)", leaked, err)
	}
}
