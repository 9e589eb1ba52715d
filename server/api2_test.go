package server_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
)

// TestAPI2_ClientIsTheService: every operation and stream of the service,
// through the HTTP client, answers what the service answers in-process,
// errors included: the client is the service over HTTP.
func TestAPI2_ClientIsTheService(t *testing.T) {
	f := newFixture(t, server.Config{})
	local := api.NewLocal(f.sup, api.Config{})
	c, err := server.NewClient(f.ts.URL, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	started, err := c.Run(ctx, api.RunParams{Agent: "quick", Prompt: "3"})
	if err != nil {
		t.Fatal(err)
	}
	id := started.RunID
	if _, err := c.Await(ctx, api.AwaitParams{RunID: id}); err != nil {
		t.Fatal(err)
	}
	// Each op, in both, compared as JSON.
	same := func(what string, viaClient, inProcess func(api.Service) (any, error)) {
		t.Helper()
		r1, e1 := viaClient(c)
		r2, e2 := inProcess(local)
		j1, _ := json.Marshal(r1)
		j2, _ := json.Marshal(r2)
		if api.CodeOf(e1) != api.CodeOf(e2) || string(j1) != string(j2) {
			t.Errorf("%s: through the client %s %v, in-process %s %v", what, j1, e1, j2, e2)
		}
	}
	both := func(what string, op func(api.Service) (any, error)) { same(what, op, op) }
	both("check", func(s api.Service) (any, error) { return s.Check(ctx, api.RunParams{Agent: "quick", Prompt: "x"}) })
	both("check refused", func(s api.Service) (any, error) { return s.Check(ctx, api.RunParams{Agent: "nosuch", Prompt: "x"}) })
	both("get", func(s api.Service) (any, error) { return s.Get(ctx, api.GetParams{RunID: id}) })
	both("get a record", func(s api.Service) (any, error) { return s.Get(ctx, api.GetParams{RunID: id, RecordOnly: true}) })
	both("get a session", func(s api.Service) (any, error) { return s.Get(ctx, api.GetParams{SessionID: started.SessionID}) })
	both("get unknown", func(s api.Service) (any, error) { return s.Get(ctx, api.GetParams{RunID: "run_nope"}) })
	both("list", func(s api.Service) (any, error) {
		return s.List(ctx, api.ListParams{Agent: "quick", Status: []store.RunStatus{store.StatusCompleted}, Limit: 5})
	})
	both("sessions", func(s api.Service) (any, error) { return s.Sessions(ctx, api.SessionsParams{Limit: 5}) })
	both("events", func(s api.Service) (any, error) {
		return s.Events(ctx, api.EventsParams{RunID: id, AfterSeq: 1, Limit: 2})
	})
	both("await", func(s api.Service) (any, error) { return s.Await(ctx, api.AwaitParams{RunID: id}) })
	both("cancel an ended run", func(s api.Service) (any, error) { return s.Cancel(ctx, api.RunIDParams{RunID: id}) })
	both("steer an ended run", func(s api.Service) (any, error) { return s.Steer(ctx, api.SteerParams{RunID: id, Message: "x"}) })
	both("interrupt an ended run", func(s api.Service) (any, error) { return s.Interrupt(ctx, api.InterruptParams{RunID: id}) })
	both("respond to nothing", func(s api.Service) (any, error) { return s.Respond(ctx, api.RespondParams{RunID: id, RequestID: "q9"}) })
	both("agents", func(s api.Service) (any, error) { return s.Agents(ctx, api.AgentsParams{}) })
	both("info", func(s api.Service) (any, error) { return s.Info(ctx, api.InfoParams{}) })
	both("follow", func(s api.Service) (any, error) {
		var seqs []int64
		for evs, err := range s.Follow(ctx, api.FollowParams{Runs: []string{id}, AfterSeq: 1}) {
			if err != nil {
				return seqs, err
			}
			for _, ev := range evs {
				seqs = append(seqs, ev.Seq)
			}
		}
		return seqs, nil
	})
	both("follow unknown", func(s api.Service) (any, error) {
		for _, err := range s.Follow(ctx, api.FollowParams{Runs: []string{"run_nope"}}) {
			return nil, err
		}
		return nil, nil
	})
	both("follow all", func(s api.Service) (any, error) {
		var got []string
		for ev, err := range s.FollowAll(ctx, api.FollowAllParams{AfterCursor: new(int64)}) {
			if err != nil {
				return got, err
			}
			got = append(got, ev.RunID+" "+string(ev.Type))
			if ev.Type == "done" {
				return got, nil
			}
		}
		return got, nil
	})
	both("watch runs", func(s api.Service) (any, error) {
		for recs, err := range s.WatchRuns(ctx, api.WatchParams{Limit: 10}) {
			ids := []string{}
			for _, r := range recs {
				ids = append(ids, r.ID+" "+string(r.Status))
			}
			return ids, err
		}
		return nil, nil
	})
}
