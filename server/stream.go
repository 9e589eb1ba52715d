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
	"github.com/drover-run/drover/runs"
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
				if ctx.Err() == nil {
					s.log.Warn("stream: ledger read failed; retrying", "run", runID, "after", after, "err", err)
				}
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

// pump writes the events from evs to the stream with send, with
// heartbeats, until evs is closed, send fails, or the client or the server
// goes away.
func (s *Server) pump(ctx context.Context, st *sse, evs <-chan store.Event, send func(store.Event) error) {
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				return
			}
			if send(ev) != nil {
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
		s.writeErr(w, err)
		return
	}
	if _, err := s.st.GetRun(r.Context(), runID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			s.writeErr(w, &protocol.Error{Code: protocol.CodeNotFound, Message: err.Error()})
		} else {
			s.writeErr(w, err)
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
	s.pump(ctx, st, evs, func(ev store.Event) error {
		return st.event(strconv.FormatInt(ev.Seq, 10), string(ev.Type), ev.JSON)
	})
}

// handleStreamAll: GET /v1/stream — the events of every run, from the
// ledger's log (runs.Supervisor.FollowLog), with id = the event's cursor.
// Without Last-Event-ID (or ?after=) it starts with the runs live now:
// their events so far (no id), then "event: synced" carrying the cursor
// they reach; after that, every event of any run as it is recorded. With
// Last-Event-ID: N it sends every event after cursor N. It ends when the
// client or the server goes away; a failed ledger read is retried from
// the last cursor sent.
func (s *Server) handleStreamAll(w http.ResponseWriter, r *http.Request) {
	after, err := resumeAfter(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if r.Header.Get("Last-Event-ID") == "" && r.URL.Query().Get("after") == "" {
		after = runs.FromLive
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	st := startStream(w)
	// The log is read on its own goroutine so that heartbeats go out
	// while it waits for events; it is owned here and ended with ctx.
	evs := make(chan store.Event)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		for {
			for ev, err := range s.sup.FollowLog(ctx, after) {
				if err != nil {
					if ctx.Err() == nil {
						s.log.Warn("stream: ledger read failed; retrying", "after", after, "err", err)
					}
					break
				}
				select {
				case evs <- ev:
				case <-ctx.Done():
					return
				}
				if ev.RunID == "" || ev.Cursor > 0 { // the marker, or a tailed event
					after = ev.Cursor
				}
			}
			select {
			case <-time.After(s.cfg.Poll):
			case <-ctx.Done():
				return
			}
		}
	})
	s.pump(ctx, st, evs, func(ev store.Event) error {
		switch {
		case ev.RunID == "": // FollowLog's marker: caught up
			return st.event(strconv.FormatInt(ev.Cursor, 10), "synced", []byte("{}"))
		case ev.Cursor == 0: // a catch-up event, out of the log's order
			return st.event("", string(ev.Type), ev.JSON)
		}
		return st.event(strconv.FormatInt(ev.Cursor, 10), string(ev.Type), ev.JSON)
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
