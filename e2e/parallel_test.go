package e2e

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// TestENG011_FourVendorsInParallel runs claude, codex, gemini and opencode
// at once through `drover run --fakemodel`, offline: four runs, four done
// events. With one vendor's binary missing, that run fails alone.
func TestENG011_FourVendorsInParallel(t *testing.T) {
	bins := map[string]string{
		"DROVER_CLAUDE_BIN":   vendorBin(t, "claude", "DROVER_CLAUDE_BIN"),
		"DROVER_CODEX_BIN":    vendorBin(t, "codex", "DROVER_CODEX_BIN"),
		"DROVER_GEMINI_BIN":   vendorBin(t, "gemini", "DROVER_GEMINI_BIN"),
		"DROVER_OPENCODE_BIN": vendorBin(t, "opencode", "DROVER_OPENCODE_BIN"),
	}
	droverBin := buildDrover(t)
	run := func(t *testing.T, missing string) (map[string]drover.DonePayload, map[string][]drover.ErrorPayload, error) {
		home := t.TempDir()
		env := append(os.Environ(), "HOME="+home, "XDG_STATE_HOME="+filepath.Join(home, "state"), "DROVER_DB="+filepath.Join(home, "drover.db"))
		for k, v := range bins {
			if k == missing {
				v = filepath.Join(home, "no-such-binary")
			}
			env = append(env, k+"="+v)
		}
		cmd := exec.Command(droverBin, "run", "--json", "--fakemodel", "--cwd", t.TempDir(),
			"-a", "claude", "-a", "codex", "-a", "gemini", "-a", "opencode", "run ls")
		cmd.Env = env
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		done := map[string]drover.DonePayload{}
		errs := map[string][]drover.ErrorPayload{}
		agents := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			var ev drover.Event
			if jerr := json.Unmarshal([]byte(l), &ev); jerr != nil {
				t.Fatalf("stdout line is not an event: %q", l)
			}
			if prev, ok := agents[ev.RunID]; ok && prev != ev.Agent {
				t.Fatalf("run %s mixes agents %s and %s", ev.RunID, prev, ev.Agent)
			}
			agents[ev.RunID] = ev.Agent
			if _, seen := done[ev.Agent]; seen {
				t.Fatalf("%s: event after done", ev.Agent)
			}
			switch p := ev.Payload.(type) {
			case drover.DonePayload:
				done[ev.Agent] = p
			case drover.ErrorPayload:
				errs[ev.Agent] = append(errs[ev.Agent], p)
			}
		}
		t.Logf("stderr: %s", stderr.String())
		return done, errs, err
	}

	t.Run("all four", func(t *testing.T) {
		done, errs, err := run(t, "")
		if err != nil {
			t.Fatalf("drover run: %v (errors %+v)", err, errs)
		}
		for _, a := range []string{"claude-code", "codex", "gemini", "opencode"} {
			if d, ok := done[a]; !ok || d.Status != drover.StatusSuccess {
				t.Errorf("%s: done %+v ok=%v errors %+v", a, d, ok, errs[a])
			}
		}
	})
	t.Run("one binary missing", func(t *testing.T) {
		done, errs, err := run(t, "DROVER_CODEX_BIN")
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want 1", err)
		}
		if d := done["codex"]; d.Status != drover.StatusError || len(errs["codex"]) != 1 || errs["codex"][0].Code != drover.CodeNotInstalled {
			t.Fatalf("codex: %+v %+v", d, errs["codex"])
		}
		for _, a := range []string{"claude-code", "gemini", "opencode"} {
			if d := done[a]; d.Status != drover.StatusSuccess {
				t.Errorf("%s disturbed by the missing codex: %+v %+v", a, d, errs[a])
			}
		}
	})
}
