package server

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"strconv"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/store"
)

// handleRunsStream: GET /v1/runs/stream?limit=N — the run records
// themselves as SSE (api.Service.WatchRuns), for a live list of runs (the
// dashboard's): first an "event: run" for each of the newest N runs and
// every live run, oldest first, then "event: synced"; after that an
// "event: run" whenever a record changes (status, usage, lastSeq, pid, …).
// Records carry no id: a client that reconnects gets a fresh snapshot.
func (s *Server) handleRunsStream(w http.ResponseWriter, r *http.Request) {
	var p api.WatchParams
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > api.MaxWatchLimit {
			s.writeErr(w, api.Errorf(api.CodeValidation, "limit %q: want 1 to %d", v, api.MaxWatchLimit))
			return
		}
		p.Limit = n
	}
	ctx, cancel := s.requestContext(r.Context())
	defer cancel()
	next, stop := iter.Pull2(s.svc.WatchRuns(ctx, p))
	defer stop()
	// The first batch is read before the headers go out, so that a ledger
	// that cannot be read is an error response rather than an empty stream.
	first, err, ok := next()
	if !ok {
		return
	}
	if err != nil {
		s.writeErr(w, err)
		return
	}
	st := startStream(w)
	if sendRuns(st, first) != nil || st.write([]byte("event: synced\ndata: {}\n\n")) != nil {
		return
	}
	pump(s, ctx, st, func(ctx context.Context, out chan<- []store.Run) {
		for {
			recs, err, ok := next()
			if !ok || err != nil {
				return
			}
			if len(recs) == 0 {
				continue
			}
			select {
			case out <- recs:
			case <-ctx.Done():
				return
			}
		}
	}, func(recs []store.Run) error { return sendRuns(st, recs) })
}

// sendRuns writes records as "run" events.
func sendRuns(st *sse, recs []store.Run) error {
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if err := st.event("", "run", b); err != nil {
			return err
		}
	}
	return nil
}
