package protocol_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/testkit/agenttest"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/drover-run/drover/store/sqlite"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func text(s string) drover.Event {
	return drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: s}}
}

func done(status drover.DoneStatus) drover.Event {
	return drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: status, ResumeToken: "tok",
		Usage: drover.Usage{InputTokens: 3, OutputTokens: 2}}}
}

// quick emits n texts and done; failing emits an error and done error;
// hang emits one text and waits for cancellation.
func agents() []*agenttest.Agent {
	return []*agenttest.Agent{
		{Name: "quick", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
			n := 3
			fmt.Sscanf(req.Prompt, "%d", &n)
			for i := range n {
				if !y(text(fmt.Sprintf("#%d", i)), nil) {
					return
				}
			}
			y(done(drover.StatusSuccess), nil)
		}},
		{Name: "failing", Fn: func(_ context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			y(drover.Event{Type: drover.TypeError, Payload: drover.ErrorPayload{Code: drover.CodeModelError, Message: "model fell over"}}, nil)
			y(done(drover.StatusError), nil)
		}},
		// keyed says whether its credential is the server's profile a.
		{Name: "keyed", Fn: func(_ context.Context, req drover.Request, y func(drover.Event, error) bool) {
			says := "another key"
			if req.Options.Env["API_KEY"] == "server-secret-a" {
				says = "the server's key of profile a"
			}
			if y(text(says), nil) {
				y(done(drover.StatusSuccess), nil)
			}
		}},
		{Name: "hang", Fn: func(ctx context.Context, _ drover.Request, y func(drover.Event, error) bool) {
			if y(text("working"), nil) {
				<-ctx.Done()
			}
		}},
	}
}

// fixture is a real SQLite ledger, a supervisor over the fake agents, and
// a protocol server.
type fixture struct {
	st  store.Store
	sup *runs.Supervisor
	svc api.Service
	srv *protocol.Server
}

func newFixture(t testing.TB, cfg protocol.Config) *fixture {
	return newFixtureWith(t, cfg, api.Config{})
}

// newFixtureWith is newFixture with the service's own configuration.
func newFixtureWith(t testing.TB, cfg protocol.Config, acfg api.Config) *fixture {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "drover.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	reg := drover.NewRegistry()
	for _, a := range agents() {
		if err := reg.Register(a); err != nil {
			t.Fatal(err)
		}
	}
	if err := reg.Register(agenttest.Asker(true)); err != nil {
		t.Fatal(err)
	}
	sup, err := runs.New(context.Background(), engine.New(reg), st, runs.Config{Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sup.Close() })
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 100 * time.Millisecond
	}
	if cfg.Poll == 0 {
		cfg.Poll = 50 * time.Millisecond
	}
	if cfg.Authenticate == nil {
		cfg.Authenticate = sup.TokenRun
	}
	svc := api.NewLocal(sup, acfg)
	return &fixture{st: st, sup: sup, svc: svc, srv: protocol.NewServer(svc, cfg)}
}

// wire is a raw JSON-lines connection to Serve over in-memory pipes.
type wire struct {
	t      *testing.T
	w      *io.PipeWriter
	r      *bufio.Reader
	rc     *io.PipeReader
	served chan error
	events []line // event lines read while looking for a response
}

// line is one output line, decoded.
type line struct {
	ID           json.RawMessage  `json:"id"`
	Result       json.RawMessage  `json:"result"`
	Error        *api.Error       `json:"error"`
	Subscription string           `json:"subscription"`
	Cursor       int64            `json:"cursor"`
	Event        *json.RawMessage `json:"event"`
	raw          string
}

func (f *fixture) dial(t *testing.T) *wire {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	w := &wire{t: t, w: inW, r: bufio.NewReader(outR), rc: outR, served: make(chan error, 1)}
	go func() {
		err := protocol.Serve(context.Background(), f.srv, inR, outW)
		outW.Close()
		w.served <- err
	}()
	t.Cleanup(func() { w.close() })
	return w
}

// close ends the input and waits for Serve, draining its output.
func (w *wire) close() error {
	w.w.Close()
	go io.Copy(io.Discard, w.rc)
	select {
	case err := <-w.served:
		w.served <- err
		return err
	case <-time.After(20 * time.Second):
		w.t.Fatal("Serve did not return after the end of input")
		return nil
	}
}

func (w *wire) send(s string) {
	w.t.Helper()
	if _, err := io.WriteString(w.w, s+"\n"); err != nil {
		w.t.Fatalf("send: %v", err)
	}
}

// next reads one output line.
func (w *wire) next() line {
	w.t.Helper()
	s, err := w.r.ReadString('\n')
	if err != nil {
		w.t.Fatalf("read: %v (partial %q)", err, s)
	}
	var l line
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		w.t.Fatalf("output line is not JSON: %q", s)
	}
	l.raw = strings.TrimSpace(s)
	return l
}

// nextEvent returns the next event line: one kept aside by response, else
// the next line read.
func (w *wire) nextEvent() line {
	w.t.Helper()
	if len(w.events) > 0 {
		l := w.events[0]
		w.events = w.events[1:]
		return l
	}
	return w.next()
}

// response reads lines until the response to id, keeping events aside.
func (w *wire) response(id string) line {
	w.t.Helper()
	for {
		l := w.next()
		if l.Event != nil {
			w.events = append(w.events, l)
			continue
		}
		if string(l.ID) == id {
			return l
		}
		w.t.Fatalf("unexpected line while waiting for id %s: %s", id, l.raw)
	}
}

// call sends a request and returns its result, failing on an error.
func (w *wire) call(id, req string, out any) {
	w.t.Helper()
	w.send(req)
	l := w.response(id)
	if l.Error != nil {
		w.t.Fatalf("%s: %v", req, l.Error)
	}
	if out != nil {
		if err := json.Unmarshal(l.Result, out); err != nil {
			w.t.Fatalf("result of %s: %v", req, err)
		}
	}
}

// fail sends a request and returns its error code, failing on success.
func (w *wire) fail(id, req string) string {
	w.t.Helper()
	w.send(req)
	l := w.response(id)
	if l.Error == nil {
		w.t.Fatalf("%s: want an error, got %s", req, l.raw)
	}
	return l.Error.Code
}

// ues decodes an event line's event.
func ues(t *testing.T, l line) drover.Event {
	t.Helper()
	var ev drover.Event
	if err := json.Unmarshal(*l.Event, &ev); err != nil {
		t.Fatalf("event %s: %v", *l.Event, err)
	}
	return ev
}

func isSynced(l line) (protocol.Synced, bool) {
	var sy protocol.Synced
	if l.Event == nil || json.Unmarshal(*l.Event, &sy) != nil || sy.Type != protocol.TypeSynced {
		return sy, false
	}
	return sy, true
}

func isLagged(l line) (protocol.Lagged, bool) {
	var lg protocol.Lagged
	if l.Event == nil || json.Unmarshal(*l.Event, &lg) != nil || lg.Type != protocol.TypeLagged {
		return lg, false
	}
	return lg, true
}

func await(t *testing.T, sup *runs.Supervisor, ids ...string) []*store.Run {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	rs, err := sup.Await(ctx, ids...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func runsReq(agent, prompt string) runs.StartRequest {
	return runs.StartRequest{Agent: agent, Prompt: prompt}
}

func newReader(r io.Reader) *bufio.Reader { return bufio.NewReader(r) }

// start starts a run on the fixture's supervisor directly and returns its id.
func (f *fixture) start(req runs.StartRequest) (string, error) {
	started, err := f.sup.Start(context.Background(), req)
	return started.RunID, err
}

// awaitIDs awaits ids through c.
func awaitIDs(ctx context.Context, c *protocol.Client, ids ...string) ([]store.Run, error) {
	r, err := c.Await(ctx, api.AwaitParams{Runs: ids})
	if err != nil {
		return nil, err
	}
	return r.Runs, nil
}

// cancelID cancels run id through c.
func cancelID(ctx context.Context, c *protocol.Client, id string) error {
	_, err := c.Cancel(ctx, api.RunIDParams{RunID: id})
	return err
}

// listRuns lists runs through c.
func listRuns(ctx context.Context, c *protocol.Client, p api.ListParams) ([]store.Run, error) {
	r, err := c.List(ctx, p)
	if err != nil {
		return nil, err
	}
	return r.Runs, nil
}

// listAgents lists agents through c.
func listAgents(ctx context.Context, c *protocol.Client) ([]api.AgentInfo, error) {
	r, err := c.Agents(ctx, api.AgentsParams{})
	if err != nil {
		return nil, err
	}
	return r.Agents, nil
}
