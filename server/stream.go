package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/store"
)

// sse writes one Server-Sent Events stream.
type sse struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startStream sends the stream's headers. Streams have no write deadline:
// the server's timeouts must not cut a long run's stream.
func startStream(w http.ResponseWriter) *sse {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	s := &sse{w: w, rc: rc}
	_ = rc.Flush()
	return s
}

// event writes one event: id (none if empty), event type, and JSON data.
func (s *sse) event(id, typ string, data []byte) error {
	var b bytes.Buffer
	b.Grow(len(data) + len(id) + len(typ) + 32)
	if id != "" {
		b.WriteString("id: ")
		b.WriteString(id)
		b.WriteByte('\n')
	}
	b.WriteString("event: ")
	b.WriteString(typ)
	b.WriteByte('\n')
	// Stored events are compact JSON, one line; split anyway so that a
	// newline could never end the event early.
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		b.WriteString("data: ")
		b.Write(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	return s.write(b.Bytes())
}

func (s *sse) ping() error { return s.write([]byte(": ping\n\n")) }

func (s *sse) write(b []byte) error {
	if _, err := s.w.Write(b); err != nil {
		return err
	}
	return s.rc.Flush()
}

// resumeAfter is the seq a stream starts after: Last-Event-ID, else
// ?after=, else 0.
func resumeAfter(r *http.Request) (int64, error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	return intParam(strings.TrimSpace(v))
}

// follow sends runID's events after `after` on out until the run has
// ended and every event was sent (true), or ctx ends (false). The ledger
// is the source: a reader that blocks holds up only this goroutine,
// never the run. A failed ledger read is retried from the same seq.
func (s *Server) follow(ctx context.Context, runID string, after int64, out chan<- store.Event) bool {
	for {
		failed := false
		for ev, err := range s.sup.Follow(ctx, runID, after) {
			if err != nil {
				failed = true
				break
			}
			select {
			case out <- ev:
				after = ev.Seq
			case <-ctx.Done():
				return false
			}
		}
		if ctx.Err() != nil {
			return false
		}
		if !failed {
			return true
		}
		select {
		case <-time.After(s.cfg.Poll):
		case <-ctx.Done():
			return false
		}
	}
}

// pump writes the events from evs to the stream with heartbeats, until
// evs is closed (true) or the client or the server goes away.
func (s *Server) pump(ctx context.Context, st *sse, evs <-chan store.Event, id func(store.Event) string) {
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				return
			}
			if st.event(id(ev), string(ev.Type), ev.JSON) != nil {
				return
			}
		case <-hb.C:
			if st.ping() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}

// handleStream: GET /v1/runs/{id}/stream — the run's events as SSE, id =
// seq, from after Last-Event-ID (or ?after=); ends once the run has ended
// and every event was sent.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("id")
	after, err := resumeAfter(r)
	if err != nil {
		writeErr(w, err)
		return
	}
	if _, err := s.st.GetRun(r.Context(), runID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeErr(w, &protocol.Error{Code: protocol.CodeNotFound, Message: err.Error()})
		} else {
			writeErr(w, err)
		}
		return
	}
	ctx, cancel := s.requestContext(r)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	st := startStream(w)
	evs := make(chan store.Event)
	wg.Go(func() {
		if s.follow(ctx, runID, after, evs) {
			close(evs)
		}
	})
	s.pump(ctx, st, evs, func(ev store.Event) string { return strconv.FormatInt(ev.Seq, 10) })
}

// handleStreamAll: GET /v1/stream — the events of every run that is live
// now or starts later, each from its first event; id = "runId/seq". It
// ends when the client or the server goes away.
func (s *Server) handleStreamAll(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	st := startStream(w)
	evs := make(chan store.Event)
	wg.Go(func() { s.watchAll(ctx, evs) })
	s.pump(ctx, st, evs, func(ev store.Event) string { return ev.RunID + "/" + strconv.FormatInt(ev.Seq, 10) })
}

// watchAll follows every run that is live when it starts or is created
// after, like the protocol's subscribe all:true. Runs of this supervisor
// are seen at once (RunsChanged), runs of other processes within Poll.
func (s *Server) watchAll(ctx context.Context, out chan<- store.Event) {
	const margin = 10 * time.Second // a run's CreatedAt is taken just before it is recorded
	t0 := time.Now()
	since := t0.Add(-margin)
	seen := map[string]time.Time{}
	var followers sync.WaitGroup
	defer followers.Wait()
	add := func(r store.Run, live bool) {
		if _, ok := seen[r.ID]; ok {
			return
		}
		seen[r.ID] = r.CreatedAt
		if live || !r.CreatedAt.Before(t0) || !r.Status.Terminal() {
			followers.Go(func() { s.follow(ctx, r.ID, 0, out) })
		}
	}
	if rs, err := s.st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.StatusPending, store.StatusRunning}}); err == nil {
		for _, r := range rs {
			add(r, true)
		}
	}
	s.onRunsChanged(ctx, func() bool {
		rs, err := s.st.ListRuns(ctx, store.RunFilter{Since: since})
		if err != nil {
			return true // retried at the next wake-up
		}
		newest := since
		for i := len(rs) - 1; i >= 0; i-- { // oldest first
			add(rs[i], false)
			if rs[i].CreatedAt.Add(-margin).After(newest) {
				newest = rs[i].CreatedAt.Add(-margin)
			}
		}
		since = newest
		for id, at := range seen {
			if at.Before(since) {
				delete(seen, id)
			}
		}
		return true
	})
}

// onRunsChanged calls scan at once, then each time a run of this
// supervisor starts or ends and every Poll (for runs of other processes
// sharing the ledger), until ctx ends or scan returns false. The change
// channel is taken before each scan, so no change is missed between them.
func (s *Server) onRunsChanged(ctx context.Context, scan func() bool) {
	tick := time.NewTicker(s.cfg.Poll)
	defer tick.Stop()
	for {
		changed := s.sup.RunsChanged()
		if !scan() {
			return
		}
		select {
		case <-changed:
		case <-tick.C:
		case <-ctx.Done():
			return
		}
	}
}
