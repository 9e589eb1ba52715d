package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover"
)

// SEC-4: a supervised run (drover keeps every settings file out, so none
// can widen the tier) still reaches the provider the user configured in
// their own Claude settings.json — here the world's fakemodel, named only
// there: the run has no endpoint of drover's.
func TestSEC4_ClaudeUserProviderKept(t *testing.T) {
	w := newWorld(t, `{"rules":[{"match":"","steps":[{"text":"answered by the user's provider"}]}]}`)
	settings := `{"env":{"ANTHROPIC_BASE_URL":"` + w.url + `","ANTHROPIC_API_KEY":"sk-user","CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC":"1"},
		"permissions":{"allow":["Bash(*)"]}}`
	if err := os.MkdirAll(filepath.Join(w.home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(w.home, ".claude", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	zero := 0
	evs := w.run(context.Background(), "who answers?", drover.Options{Binary: w.bin, Cwd: w.cwd, Tier: drover.TierSupervised,
		APIRetries: &zero, Timeout: 2 * time.Minute,
		// The user's own home: no CLAUDE_CONFIG_DIR, no endpoint.
		Env: map[string]string{"HOME": w.home, "ANTHROPIC_BASE_URL": "", "ANTHROPIC_API_KEY": ""}})
	d := doneOf(t, evs)
	if d.Status != drover.StatusSuccess || d.Result != "answered by the user's provider" {
		t.Fatalf("done %+v: the run did not reach the user's provider", d)
	}
	if n := len(w.fake.Requests()); n == 0 {
		t.Fatal("the user's provider got no request")
	}
}
