package server

import (
	"bytes"
	"context"
	"iter"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/api"
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

// resumeAfter is the seq (or cursor) a stream starts after:
// Last-Event-ID, else ?after=; set is false when neither is given.
func resumeAfter(r *http.Request) (after int64, set bool, err error) {
	v := r.Header.Get("Last-Event-ID")
	if v == "" {
		v = r.URL.Query().Get("after")
	}
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false, api.Errorf(api.CodeValidation, "%q: want a non-negative integer", v)
	}
	return n, true, nil
}

// pump writes the stream of items from next until it ends (false), the
// client or the server goes away, or a write fails, with a heartbeat
// whenever it has been quiet for Heartbeat. next runs on a goroutine of
// its own, owned here, so that heartbeats go out while it waits.
func pump[T any](s *Server, ctx context.Context, st *sse, produce func(ctx context.Context, out chan<- T), send func(T) error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	items := make(chan T)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() {
		defer close(items)
		produce(ctx, items)
	})
	hb := time.NewTicker(s.cfg.Heartbeat)
	defer hb.Stop()
	for {
		select {
		case it, ok := <-items:
			if !ok || send(it) != nil {
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

// retrying sends what stream yields to out until it ends without error
// (true) or ctx ends (false); a failed ledger read is logged and the
// stream started again, after Poll, by again(), from where it was.
func retrying[T any](s *Server, ctx context.Context, what string, out chan<- T, again func() iter.Seq2[T, error]) bool {
	for {
		failed := false
		for it, err := range again() {
			if err != nil {
				if ctx.Err() == nil {
					s.log.Warn("stream: ledger read failed; retrying", "stream", what, "err", err)
				}
				failed = true
				break
			}
			select {
			case out <- it:
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

// handleStream: GET /v1/runs/{runId}/stream — the run's events as SSE, id
// = seq, from after Last-Event-ID (or ?after=); ends once the run has
// ended and every event was sent.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	runID := r.PathValue("runId")
	after, _, err := resumeAfter(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	// Checked before the headers go out, so that an unknown run is an
	// error response rather than an empty stream.
	if _, err := s.svc.Get(r.Context(), api.GetParams{RunID: runID, RecordOnly: true}); err != nil {
		s.writeErr(w, err)
		return
	}
	ctx, cancel := s.requestContext(r.Context())
	defer cancel()
	st := startStream(w)
	pump(s, ctx, st, func(ctx context.Context, out chan<- []store.Event) {
		retrying(s, ctx, runID, out, func() iter.Seq2[[]store.Event, error] {
			return func(yield func([]store.Event, error) bool) {
				for evs, err := range s.svc.Follow(ctx, api.FollowParams{Runs: []string{runID}, AfterSeq: after}) {
					if len(evs) > 0 {
						after = evs[len(evs)-1].Seq
					}
					if !yield(evs, err) {
						return
					}
				}
			}
		})
	}, func(evs []store.Event) error {
		for _, ev := range evs {
			if err := st.event(strconv.FormatInt(ev.Seq, 10), string(ev.Type), ev.JSON); err != nil {
				return err
			}
		}
		return nil
	})
}

// handleStreamAll: GET /v1/stream — the events of every run, from the
// ledger's log (api.Service.FollowAll), with id = the event's cursor.
// Without Last-Event-ID (or ?after=) it starts with the runs live now:
// their events so far (no id), then "event: synced" carrying the cursor
// they reach; after that, every event of any run as it is recorded. With
// Last-Event-ID: N it sends every event after cursor N. It ends when the
// client or the server goes away; a failed ledger read is retried from
// the last cursor sent.
func (s *Server) handleStreamAll(w http.ResponseWriter, r *http.Request) {
	after, set, err := resumeAfter(r)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	var from *int64
	if set {
		from = &after
	}
	ctx, cancel := s.requestContext(r.Context())
	defer cancel()
	// The log's starting point is taken before the headers go out
	// (FollowAll takes it when called): a run the client starts once it
	// sees the response is followed, however late the pump's producer
	// runs. Its context ends with the pump's, which waits for the producer.
	logCtx, stopLog := context.WithCancel(ctx)
	defer stopLog()
	log := s.svc.FollowAll(logCtx, api.FollowAllParams{AfterCursor: from})
	st := startStream(w)
	pump(s, ctx, st, func(ctx context.Context, out chan<- store.Event) {
		context.AfterFunc(ctx, stopLog)
		retrying(s, ctx, "all", out, func() iter.Seq2[store.Event, error] {
			if log == nil {
				log = s.svc.FollowAll(logCtx, api.FollowAllParams{AfterCursor: from})
			}
			again := log
			log = nil
			return func(yield func(store.Event, error) bool) {
				for ev, err := range again {
					if err == nil && (ev.RunID == "" || ev.Cursor > 0) { // the marker, or a tailed event
						c := ev.Cursor
						from = &c
					}
					if !yield(ev, err) {
						return
					}
				}
			}
		})
		// The log never ends: a stream that did ended with its context.
	}, func(ev store.Event) error {
		switch {
		case ev.RunID == "": // caught up
			return st.event(strconv.FormatInt(ev.Cursor, 10), "synced", []byte("{}"))
		case ev.Cursor == 0: // a catch-up event, out of the log's order
			return st.event("", string(ev.Type), ev.JSON)
		}
		return st.event(strconv.FormatInt(ev.Cursor, 10), string(ev.Type), ev.JSON)
	})
}
