package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/store"
)

// Run-record stream limits: how many of the newest runs a client may ask
// to watch.
const (
	defaultWatchLimit = 100
	maxWatchLimit     = 1000
)

// handleRunsStream: GET /v1/runs/stream?limit=N — the run records
// themselves as SSE, for a live list of runs (the dashboard's): first an
// "event: run" for each of the newest N runs and every live run, oldest
// first, then "event: synced"; after that an "event: run" whenever a
// record changes (status, usage, lastSeq, pid, …). Records carry no id: a
// client that reconnects gets a fresh snapshot. Changes by this process's
// supervisor are seen at once, others within Poll.
func (s *Server) handleRunsStream(w http.ResponseWriter, r *http.Request) {
	limit := defaultWatchLimit
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := intParam(v)
		if err != nil || n == 0 || n > maxWatchLimit {
			s.writeErr(w, &protocol.Error{Code: protocol.CodeValidation, Message: fmt.Sprintf("limit %q: want 1 to %d", v, maxWatchLimit)})
			return
		}
		limit = int(n)
	}
	ctx, cancel := s.requestContext(r)
	defer cancel()
	// The first scan happens before the headers go out, so that a ledger
	// that cannot be read is an error response rather than an empty stream.
	rw := &runWatch{s: s, limit: limit, sent: map[string][]byte{}}
	first, err := rw.scan(ctx)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	st := startStream(w)
	if rw.send(st, first) != nil || st.write([]byte("event: synced\ndata: {}\n\n")) != nil {
		return
	}
	quiet := time.Now()
	s.onRunsChanged(ctx, func() bool {
		recs, err := rw.scan(ctx)
		switch {
		case err != nil:
			return ctx.Err() == nil // a failed read is retried at the next wake-up
		case len(recs) > 0:
			quiet = time.Now()
			return rw.send(st, recs) == nil
		case time.Since(quiet) >= s.cfg.Heartbeat:
			quiet = time.Now()
			return st.ping() == nil
		}
		return true
	})
}

// runWatch remembers what one stream has sent, to send only changes.
type runWatch struct {
	s     *Server
	limit int
	// sent is each watched run's record as last sent, as JSON.
	sent map[string][]byte
}

// scan reads the newest runs, the live ones, and the watched runs that had
// not ended when last sent (they may have left the newest window since),
// and returns the records that differ from what was sent, oldest first.
func (rw *runWatch) scan(ctx context.Context) ([][]byte, error) {
	newest, err := rw.s.st.ListRuns(ctx, store.RunFilter{Limit: rw.limit})
	if err != nil {
		return nil, err
	}
	live, err := rw.s.st.ListRuns(ctx, store.RunFilter{Status: []store.RunStatus{store.StatusPending, store.StatusRunning}, Limit: maxWatchLimit})
	if err != nil {
		return nil, err
	}
	seen := make(map[string]bool, len(newest)+len(live))
	all := make([]store.Run, 0, len(newest)+len(live))
	for _, r := range slices.Concat(newest, live) {
		if !seen[r.ID] {
			seen[r.ID] = true
			all = append(all, r)
		}
	}
	for id, b := range rw.sent {
		if seen[id] {
			continue
		}
		var prev store.Run
		if json.Unmarshal(b, &prev) == nil && prev.Status.Terminal() {
			delete(rw.sent, id) // ended and out of the window: forget it
			continue
		}
		r, err := rw.s.st.GetRun(ctx, id)
		if err != nil {
			delete(rw.sent, id)
			continue
		}
		all = append(all, *r)
	}
	slices.SortStableFunc(all, func(a, b store.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	var out [][]byte
	for _, r := range all {
		b, err := json.Marshal(r)
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(rw.sent[r.ID], b) {
			rw.sent[r.ID] = b
			out = append(out, b)
		}
	}
	return out, nil
}

// send writes records as "run" events.
func (rw *runWatch) send(st *sse, recs [][]byte) error {
	for _, b := range recs {
		if err := st.event("", "run", b); err != nil {
			return err
		}
	}
	return nil
}
