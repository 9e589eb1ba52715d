package worker_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/postgres/pgtest"
	"github.com/drover-run/drover/worker"
)

// limitedAgent is rate limited whenever the run's credential is key-a.
func limitedAgent() drover.Adapter {
	caps := drover.Capabilities{Tiers: drover.Tiers(), ConfigDir: true}
	return &agenttest.Agent{Name: "limited", Caps: &caps, Fn: func(ctx context.Context, req drover.Request, y func(drover.Event, error) bool) {
		if req.Options.Env["API_KEY"] == "key-a" {
			if y(drover.Event{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: drover.CodeRateLimited, Message: "429 from the API"}}, nil) {
				y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusError}}, nil)
			}
			return
		}
		if y(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "answered with " + req.Options.Env["API_KEY"]}}, nil) {
			y(drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess}}, nil)
		}
	}}
}

// workerProfiles resolves profile NAME to the credential API_KEY=key-NAME,
// as a worker's profiles file would.
func workerProfiles(names []string) ([]drover.Profile, error) {
	var ps []drover.Profile
	for _, n := range names {
		if n == "missing" {
			return nil, fmt.Errorf("no profile %q", n)
		}
		ps = append(ps, drover.Profile{Name: n, Env: map[string]string{"API_KEY": "key-" + n}})
	}
	return ps, nil
}

// attemptsOf returns the profiles of the attempts a run's done event lists.
func attemptsOf(t *testing.T, st store.Store, id string) []string {
	t.Helper()
	evs, err := st.Events(context.Background(), id, 0, 0)
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %d, %v", id, len(evs), err)
	}
	var done struct {
		Metadata struct {
			Attempts []engine.AttemptRecord `json:"attempts"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(evs[len(evs)-1].JSON, &done); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range done.Metadata.Attempts {
		out = append(out, a.Profile+":"+string(a.Status))
	}
	return out
}

// TestFAIL1_CooldownsSharedByWorkers: a credential one worker found rate
// limited is skipped by another worker, on another connection pool and
// engine, until it has cooled down; each worker runs a queued run's
// profiles with its own credentials of those names, which the ledger never
// holds.
func TestFAIL1_CooldownsSharedByWorkers(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup := client(t, st)
	ctx := context.Background()
	startWorker(t, url, worker.Config{ID: "one", Agents: []string{"limited"}, Labels: []string{"one"}, Lease: 2 * time.Second, Profiles: workerProfiles})
	startWorker(t, url, worker.Config{ID: "two", Agents: []string{"limited"}, Labels: []string{"two"}, Lease: 2 * time.Second, Profiles: workerProfiles})
	// What a client sends: the profiles with their secrets (its own).
	chain := &drover.Failover{Profiles: []drover.Profile{
		{Name: "a", Env: map[string]string{"API_KEY": "client-secret-a"}},
		{Name: "b", Env: map[string]string{"API_KEY": "client-secret-b"}},
	}}
	start := func(label string) *store.Run {
		t.Helper()
		s, err := sup.Start(ctx, runs.StartRequest{Agent: "limited", Prompt: "p", Labels: []string{label}, Options: drover.Options{Failover: chain}})
		if err != nil {
			t.Fatal(err)
		}
		return await(t, sup, s.RunID)[0]
	}

	first := start("one")
	if first.Status != store.StatusCompleted || first.Owner != "worker:one" {
		t.Fatalf("first run: %s on %s (%s)", first.Status, first.Owner, first.Error)
	}
	if got := attemptsOf(t, st, first.ID); strings.Join(got, " ") != "a:error b:success" {
		t.Errorf("first run's attempts %v, want a rate limited, then b", got)
	}
	second := start("two")
	if second.Status != store.StatusCompleted || second.Owner != "worker:two" {
		t.Fatalf("second run: %s on %s (%s)", second.Status, second.Owner, second.Error)
	}
	if got := attemptsOf(t, st, second.ID); strings.Join(got, " ") != "b:success" {
		t.Errorf("second run's attempts %v: worker two should skip profile a, cooled by worker one", got)
	}
	evs, _ := st.Events(ctx, second.ID, 0, 0)
	if !strings.Contains(string(evs[len(evs)-2].JSON), "answered with key-b") {
		t.Errorf("worker two did not run with its own credential of profile b: %s", evs[len(evs)-2].JSON)
	}
	for _, r := range []*store.Run{first, second} {
		if strings.Contains(string(r.Options), "client-secret") {
			t.Errorf("run %s: the ledger holds a profile secret: %s", r.ID, r.Options)
		}
	}
}

// TestFAIL1_WorkerWithoutTheProfilesFailsTheRun: a queued run naming
// profiles that a worker cannot resolve fails at once, saying so; it never
// runs with the word "[redacted]" as a credential.
func TestFAIL1_WorkerWithoutTheProfilesFailsTheRun(t *testing.T) {
	url := pgtest.NewDatabase(t)
	st := open(t, url)
	sup := client(t, st)
	ctx := context.Background()
	startWorker(t, url, worker.Config{ID: "bare", Agents: []string{"limited"}, Labels: []string{"bare"}, Lease: 2 * time.Second})
	startWorker(t, url, worker.Config{ID: "some", Agents: []string{"limited"}, Labels: []string{"some"}, Lease: 2 * time.Second, Profiles: workerProfiles})
	for _, tc := range []struct{ label, profile, want string }{
		{"bare", "b", "worker bare has none configured"},
		{"some", "missing", `worker some: credential profiles: no profile "missing"`},
	} {
		s, err := sup.Start(ctx, runs.StartRequest{Agent: "limited", Prompt: "p", Labels: []string{tc.label},
			Options: drover.Options{Failover: &drover.Failover{Profiles: []drover.Profile{{Name: tc.profile, Env: map[string]string{"API_KEY": "x"}}}}}})
		if err != nil {
			t.Fatal(err)
		}
		r := await(t, sup, s.RunID)[0]
		if r.Status != store.StatusFailed || !strings.Contains(r.Error, tc.want) {
			t.Errorf("worker %s: run %s %q, want failed with %q", tc.label, r.Status, r.Error, tc.want)
		}
	}
}
