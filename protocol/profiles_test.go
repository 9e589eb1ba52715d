package protocol_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/protocol"
)

// FAIL-1, SEC-3: a client names a server's credential profiles by name
// alone; the server runs them with its own secrets (Config.Profiles), a
// profile given with credentials is used as given, and an unknown name is
// VALIDATION_ERROR before anything starts.
func TestFAIL1_ProfilesByNameOnTheServer(t *testing.T) {
	resolve := func(names []string) ([]drover.Profile, error) {
		var ps []drover.Profile
		for _, n := range names {
			if n != "a" {
				return nil, fmt.Errorf("no profile %q", n)
			}
			ps = append(ps, drover.Profile{Name: n, Env: map[string]string{"API_KEY": "server-secret-a"}})
		}
		return ps, nil
	}
	f := newFixtureWith(t, protocol.Config{}, api.Config{Profiles: resolve})
	ctx := context.Background()
	run := func(p drover.Profile) (string, error) {
		res, err := f.svc.Run(ctx, api.RunParams{Agent: "keyed", Prompt: "p",
			Options: &drover.Options{Failover: &drover.Failover{Profiles: []drover.Profile{p}}}})
		if err != nil {
			return "", err
		}
		await(t, f.sup, res.RunID)
		evs, err := f.st.Events(ctx, res.RunID, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		var says []string
		for _, ev := range evs {
			if ev.Type == drover.TypeText {
				says = append(says, string(ev.JSON))
			}
		}
		opts, _ := f.st.GetRun(ctx, res.RunID)
		if strings.Contains(string(opts.Options), "server-secret") {
			t.Errorf("the ledger holds the server's secret: %s", opts.Options)
		}
		return strings.Join(says, " "), nil
	}
	if got, err := run(drover.Profile{Name: "a"}); err != nil || !strings.Contains(got, "the server's key of profile a") {
		t.Errorf("profile a by name: %s, %v", got, err)
	}
	if got, err := run(drover.Profile{Name: "a", Env: map[string]string{"API_KEY": "client-secret"}}); err != nil || !strings.Contains(got, "another key") {
		t.Errorf("profile a given with a key: %s, %v", got, err)
	}
	_, err := run(drover.Profile{Name: "nope"})
	if e, ok := err.(*api.Error); !ok || e.Code != api.CodeValidation || !strings.Contains(e.Message, `no profile "nope"`) {
		t.Errorf("unknown profile: %v", err)
	}
}
