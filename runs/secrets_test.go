package runs_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
)

// SEC-3: a run's credentials (the endpoint's key, secret environment
// variables) reach its agent but never the ledger: not one byte of them is
// in the database file or its write-ahead log after the run.
func TestSEC3_NoSecretInTheLedger(t *testing.T) {
	path := filepath.Join(t.TempDir(), "drover.db")
	var seen drover.Options
	spy := &agenttest.Agent{Name: "spy", Caps: &drover.Capabilities{Tiers: drover.Tiers(), Endpoint: true}, Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
		seen = req.Options
		y(text("ok"), nil)
		y(done("tok"), nil)
	}}
	f := newFixtureOn(t, openStore(t, path), runs.Config{}, spy)
	secrets := []string{"sk-endpoint-4f1b", "sk-env-77aa", "ghp-token-0c3e", "pg-pw-9d2e", "url-pw-51c0"}
	id := f.start(t, runs.StartRequest{Agent: "spy", Prompt: "p", Options: drover.Options{
		Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1", APIKey: secrets[0]},
		Env: map[string]string{"ANTHROPIC_API_KEY": secrets[1], "GH_TOKEN": secrets[2], "LANG": "C",
			"PGPASSWORD": secrets[3], "DATABASE_URL": "postgres://app:" + secrets[4] + "@db/app"},
	}})
	r := f.await(t, id)[0]
	if seen.Endpoint == nil || seen.Endpoint.APIKey != secrets[0] || seen.Env["GH_TOKEN"] != secrets[2] {
		t.Fatalf("the agent did not get its credentials: %+v", seen)
	}
	if !strings.Contains(string(r.Options), `"LANG":"C"`) || !strings.Contains(string(r.Options), runs.Redacted) {
		t.Fatalf("recorded options %s", r.Options)
	}
	var ledger []byte
	for _, p := range []string{path, path + "-wal"} {
		data, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		ledger = append(ledger, data...)
	}
	if len(ledger) == 0 {
		t.Fatal("no ledger bytes read")
	}
	for _, s := range secrets {
		if strings.Contains(string(ledger), s) {
			t.Errorf("the ledger holds the secret %q", s)
		}
	}
}
