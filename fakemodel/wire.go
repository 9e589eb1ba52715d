package fakemodel

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"time"
)

// wire is one vendor API's encoding: it decodes a model request into the
// neutral exchange and encodes a neutral answer. Adding a vendor API is one
// file implementing wire plus its entry in wires.
type wire interface {
	// name is the API's name in the request log, e.g. "anthropic".
	name() string
	// endpoints lists the HTTP endpoints the API serves.
	endpoints() []endpoint
	// tools lists the API's candidate tools per intent.
	tools() toolTable
	// decode reads a model request; an error is answered as a 400 with the
	// error's text.
	decode(r *http.Request, body []byte) (*exchange, error)
	// writeError answers an HTTP error with the API's error body.
	writeError(w http.ResponseWriter, status int, msg string)
	// writeAnswer sends a non-error answer, streamed when x.stream. It may
	// panic with http.ErrAbortHandler to abort the connection (a cut, or ctx
	// ending mid-stream).
	writeAnswer(ctx context.Context, w http.ResponseWriter, x *exchange, a *answer)
}

// wires are the vendor APIs the server speaks.
var wires = []wire{anthropicWire{}, responsesWire{}, chatWire{}, geminiWire{}}

// endpoint is one HTTP endpoint of a wire.
type endpoint struct {
	method string
	// path is the exact URL path, or a prefix when it ends in "/".
	path string
	// serve handles a request whose body has been read; nil means a model
	// turn, handled by Server.serveTurn.
	serve func(s *Server, w http.ResponseWriter, r *http.Request, body []byte, rec *Request)
}

func (e endpoint) matches(p string) bool {
	if len(e.path) > 0 && e.path[len(e.path)-1] == '/' {
		return len(p) > len(e.path) && p[:len(e.path)] == e.path
	}
	return p == e.path
}

// sseEvent is one server-sent event.
type sseEvent struct {
	// event is the "event:" field; "" sends a data-only event.
	event string
	// data is sent as JSON, or verbatim when it is a string.
	data any
}

// writeSSE streams events, flushing after each and pausing chunkDelay
// between them. With cutAfter >= 0 it aborts the connection after that many
// events, never sending the rest. It aborts too when ctx ends mid-stream or
// the client is gone, by panicking with http.ErrAbortHandler: net/http then
// drops the connection without ending the chunked body, which is what a
// client sees when a real stream breaks.
func writeSSE(ctx context.Context, w http.ResponseWriter, events []sseEvent, chunkDelay time.Duration, cutAfter int) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	for i, ev := range events {
		if i == cutAfter {
			panic(http.ErrAbortHandler)
		}
		if i > 0 && !sleep(ctx, chunkDelay) {
			panic(http.ErrAbortHandler)
		}
		var buf []byte
		if ev.event != "" {
			buf = append(buf, "event: "+ev.event+"\n"...)
		}
		buf = append(buf, "data: "...)
		if s, ok := ev.data.(string); ok {
			buf = append(buf, s...)
		} else {
			b, err := json.Marshal(ev.data)
			if err != nil {
				panic("fakemodel: marshal SSE event: " + err.Error()) // events are plain maps
			}
			buf = append(buf, b...)
		}
		buf = append(buf, "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			panic(http.ErrAbortHandler)
		}
		if err := rc.Flush(); err != nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// sleep waits d, or until ctx ends; it reports whether the full wait
// elapsed.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// writeJSON sends v as a JSON body with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic("fakemodel: marshal JSON answer: " + err.Error()) // answers are plain maps
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// newID returns prefix followed by 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return prefix + hex.EncodeToString(b[:])
}
