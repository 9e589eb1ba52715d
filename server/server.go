// Package server is drover's HTTP transport (docs/requirements.md §8, PRO-3): the
// operations of the client protocol as JSON endpoints, plus Server-Sent
// Events streams of runs' UES events. It is a thin layer over
// protocol.Server, which executes every operation; streams read the ledger
// (runs.Supervisor.Follow), so a slow or stuck client never slows a run.
//
// docs/http.md describes the endpoints; openapi.json is their OpenAPI
// description.
package server

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// OpenAPI is the OpenAPI 3.1 description of the endpoints, as JSON.
//
//go:embed openapi.json
var OpenAPI []byte

// Error codes of the HTTP layer itself, besides the protocol's codes.
const (
	CodeUnauthorized = "UNAUTHORIZED"
	CodeForbidden    = "FORBIDDEN"
	CodeTooLarge     = "REQUEST_TOO_LARGE"
)

// DefaultAddr is where drover serves HTTP unless told otherwise.
const DefaultAddr = "127.0.0.1:8765"

// Config tunes a Server; zero fields take the defaults.
type Config struct {
	// Token, when set, is required of every request as
	// "Authorization: Bearer <token>" (or the dashboard's cookie). Without
	// one, only requests naming a loopback host (Host: 127.0.0.1:PORT,
	// localhost:PORT, [::1]:PORT) are served: a web page that rebinds its
	// own name to 127.0.0.1 cannot drive the server (SEC-1).
	Token string
	// Heartbeat is how often an idle stream sends a ": ping" comment;
	// 0 means 15 s.
	Heartbeat time.Duration
	// MaxBody bounds a request body, in bytes; 0 means 1 MiB.
	MaxBody int64
	// Poll is how often GET /v1/runs/stream looks for changes made by
	// other processes sharing the ledger, and how soon a stream retries a
	// failed ledger read; 0 means 1 s.
	Poll time.Duration
	// Logger receives what the server cannot tell a client: failed ledger
	// reads of a stream (retried), requests that failed inside drover.
	// nil means none (quiet).
	Logger *slog.Logger
}

// Server serves the HTTP endpoints. Create it with New; its Handler is an
// http.Handler. Close ends the streams in progress.
type Server struct {
	log  *slog.Logger
	ps   *protocol.Server
	sup  *runs.Supervisor
	st   store.Store
	cfg  Config
	mux  *http.ServeMux
	h    http.Handler
	done chan struct{}
	once sync.Once
}

// New returns a server executing operations with ps and streaming from
// its supervisor's ledger.
func New(ps *protocol.Server, cfg Config) *Server {
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 1 << 20
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sup := ps.Supervisor()
	s := &Server{ps: ps, sup: sup, st: sup.Store(), cfg: cfg, log: log, mux: http.NewServeMux(), done: make(chan struct{})}
	s.routes()
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeError(w, http.StatusForbidden, CodeForbidden, "cross-origin request refused")
	}))
	s.h = s.hostCheck(s.auth(cop.Handler(s.mux)))
	return s
}

// hostCheck refuses, on a server without a token, a request whose Host is
// not a loopback name: DNS rebinding gives a web page a name of its own
// that resolves to 127.0.0.1, and its requests then carry that name,
// which the cross-origin check cannot tell from a same-origin request.
func (s *Server) hostCheck(next http.Handler) http.Handler {
	if s.cfg.Token != "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		if !IsLoopback(host) {
			writeError(w, http.StatusForbidden, CodeForbidden, fmt.Sprintf("host %q is not a loopback name: this server takes requests for 127.0.0.1 or localhost only (or start it with a token)", r.Host))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// Handler returns the server's handler: authentication, cross-origin
// protection, then the routes.
func (s *Server) Handler() http.Handler { return s.h }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.h.ServeHTTP(w, r) }

// Close ends every stream in progress (they return at their next step);
// other requests are not affected. Calling it again does nothing.
func (s *Server) Close() { s.once.Do(func() { close(s.done) }) }

func (s *Server) routes() {
	m := s.mux
	m.HandleFunc("POST /v1/runs", s.handleRun)
	m.HandleFunc("GET /v1/runs", s.handleList)
	m.HandleFunc("GET /v1/runs/{id}", s.handleGet)
	m.HandleFunc("POST /v1/runs/{id}/cancel", s.handleCancel)
	m.HandleFunc("POST /v1/runs/{id}/respond", s.handleRespond)
	m.HandleFunc("POST /v1/runs/{id}/steer", s.handleSteer)
	m.HandleFunc("POST /v1/runs/{id}/interrupt", s.handleInterrupt)
	m.HandleFunc("GET /v1/runs/{id}/await", s.handleAwait)
	m.HandleFunc("GET /v1/runs/{id}/events", s.handleEvents)
	m.HandleFunc("GET /v1/runs/{id}/stream", s.handleStream)
	m.HandleFunc("GET /v1/sessions/{id}", s.handleSession)
	m.HandleFunc("GET /v1/stream", s.handleStreamAll)
	m.HandleFunc("GET /v1/runs/stream", s.handleRunsStream)
	m.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(OpenAPI)
	})
	s.dashboardRoutes()
}

// auth requires the token when one is configured: a bearer header, or the
// dashboard's cookie (see handleLogin). The dashboard's files and the login
// endpoint are public.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !public(r) && !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="drover"`)
			writeError(w, http.StatusUnauthorized, CodeUnauthorized, "missing or wrong bearer token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// CheckAddr refuses to serve on addr without a token unless addr is a
// loopback address (127.0.0.0/8, ::1 or "localhost").
func CheckAddr(addr, token string) error {
	if token != "" {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if !IsLoopback(host) {
		return fmt.Errorf("refusing to serve on %s without a token: it is not a loopback address; set --token or DROVER_TOKEN, or bind 127.0.0.1", addr)
	}
	return nil
}

// IsLoopback reports whether host (no port) names only the loopback
// interface. An empty host means every interface: not loopback.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// HTTPServer returns an http.Server for s with drover's timeouts: a
// ReadHeaderTimeout, and neither ReadTimeout nor WriteTimeout: a read
// deadline that passes while a handler runs cancels its request context,
// which would end long awaits and streams (request bodies are bounded by
// MaxBody instead).
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.h,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

// errorBody is the body of every error response.
type errorBody struct {
	Error protocol.Error `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{protocol.Error{Code: code, Message: msg}})
}

// writeErr answers a protocol error with its HTTP status; a failure of
// drover's own (INTERNAL_ERROR, RUN_FAILED) is also logged.
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	var pe *protocol.Error
	if !errors.As(err, &pe) {
		pe = &protocol.Error{Code: protocol.CodeInternal, Message: err.Error()}
	}
	status := Status(pe.Code)
	if status >= 500 {
		s.log.Error("request failed", "code", pe.Code, "err", pe.Message)
	}
	writeError(w, status, pe.Code, pe.Message)
}

// Status is the HTTP status of a protocol error code.
func Status(code string) int {
	switch code {
	case protocol.CodeInvalidRequest, protocol.CodeValidation:
		return http.StatusBadRequest
	case protocol.CodeNotFound:
		return http.StatusNotFound
	case protocol.CodeConflict:
		return http.StatusConflict
	case protocol.CodeBoundaryViolation:
		return http.StatusForbidden
	case CodeUnauthorized:
		return http.StatusUnauthorized
	case CodeForbidden:
		return http.StatusForbidden
	case CodeTooLarge:
		return http.StatusRequestEntityTooLarge
	}
	return http.StatusInternalServerError
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = json.Marshal(errorBody{protocol.Error{Code: protocol.CodeInternal, Message: err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func invalid(format string, a ...any) error {
	return &protocol.Error{Code: protocol.CodeInvalidRequest, Message: fmt.Sprintf(format, a...)}
}

// handleRun: POST /v1/runs, body RunParams → 201 RunResult.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	p, ok := decodeBody[protocol.RunParams](s, w, r, "a run request", false)
	if !ok {
		return
	}
	// The run outlives the request: a client that goes away after asking
	// for it does not undo it.
	res, err := s.ps.Run(context.WithoutCancel(r.Context()), p)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	w.Header().Set("Location", "/v1/runs/"+res.RunID)
	writeJSON(w, http.StatusCreated, res)
}

// decodeBody reads r's body as one JSON value of T, strictly (unknown
// fields refused), within MaxBody; an empty body is T's zero value when
// optional. On failure it has answered the request and returns false.
func decodeBody[T any](s *Server, w http.ResponseWriter, r *http.Request, what string, optional bool) (T, bool) {
	var p T
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var mb *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF) && optional:
			return p, true
		case errors.As(err, &mb):
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", mb.Limit))
		default:
			s.writeErr(w, invalid("body is not %s: %v", what, err))
		}
		return p, false
	}
	if dec.More() {
		s.writeErr(w, invalid("body has more than one JSON value"))
		return p, false
	}
	return p, true
}

// handleRespond: POST /v1/runs/{id}/respond answers a permission request
// (CTL-1); the body is the respond op's fields but runId.
func (s *Server) handleRespond(w http.ResponseWriter, r *http.Request) {
	p, ok := decodeBody[protocol.RespondParams](s, w, r, "an answer {requestId, behavior, …}", false)
	if !ok {
		return
	}
	p.RunID, p.By = r.PathValue("id"), byHTTP(p.By)
	res, err := s.ps.Respond(context.WithoutCancel(r.Context()), p)
	s.reply(w, res, err)
}

// handleSteer: POST /v1/runs/{id}/steer sends {message} into the live run
// (CTL-3).
func (s *Server) handleSteer(w http.ResponseWriter, r *http.Request) {
	p, ok := decodeBody[protocol.SteerParams](s, w, r, "a steering message {message}", false)
	if !ok {
		return
	}
	p.RunID, p.By = r.PathValue("id"), byHTTP(p.By)
	res, err := s.ps.Steer(context.WithoutCancel(r.Context()), p)
	s.reply(w, res, err)
}

// handleInterrupt: POST /v1/runs/{id}/interrupt ends the run's current
// turn, keeping its session (CTL-3); the body ({by}) is optional.
func (s *Server) handleInterrupt(w http.ResponseWriter, r *http.Request) {
	p, ok := decodeBody[protocol.InterruptParams](s, w, r, "{by}", true)
	if !ok {
		return
	}
	p.RunID, p.By = r.PathValue("id"), byHTTP(p.By)
	res, err := s.ps.Interrupt(context.WithoutCancel(r.Context()), p)
	s.reply(w, res, err)
}

// byHTTP is who a client of the HTTP API says it is, else "http".
func byHTTP(by string) string {
	if by == "" {
		return "http"
	}
	return by
}

// reply answers with res (200) or err.
func (s *Server) reply(w http.ResponseWriter, res any, err error) {
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleList: GET /v1/runs?status=&agent=&session=&parent=&since=&limit=.
func (s *Server) handleList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var p protocol.ListParams
	for _, v := range q["status"] {
		for st := range strings.SplitSeq(v, ",") {
			if st != "" {
				p.Status = append(p.Status, store.RunStatus(st))
			}
		}
	}
	p.Agent, p.Session, p.Parent = q.Get("agent"), q.Get("session"), q.Get("parent")
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			s.writeErr(w, &protocol.Error{Code: protocol.CodeValidation, Message: fmt.Sprintf("since %q: want an RFC 3339 time", v)})
			return
		}
		p.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			s.writeErr(w, &protocol.Error{Code: protocol.CodeValidation, Message: fmt.Sprintf("limit %q: want a number", v)})
			return
		}
		p.Limit = n
	}
	res, err := s.ps.List(r.Context(), p)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleGet: GET /v1/runs/{id} → GetResult.
func (s *Server) handleGet(w http.ResponseWriter, r *http.Request) {
	res, err := s.ps.Get(r.Context(), protocol.GetParams{RunID: r.PathValue("id")})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleSession: GET /v1/sessions/{id} → GetResult with session and runs.
func (s *Server) handleSession(w http.ResponseWriter, r *http.Request) {
	res, err := s.ps.Get(r.Context(), protocol.GetParams{SessionID: r.PathValue("id")})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleCancel: POST /v1/runs/{id}/cancel → {}. Idempotent; an unknown run
// is not an error (RUN-3).
func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request) {
	res, err := s.ps.Cancel(context.WithoutCancel(r.Context()), protocol.RunIDParams{RunID: r.PathValue("id")})
	if err != nil {
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleAwait: GET /v1/runs/{id}/await blocks until the run has ended →
// RunsResult. It gives up when the client goes away.
func (s *Server) handleAwait(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := s.requestContext(r)
	defer cancel()
	res, err := s.ps.Await(ctx, protocol.AwaitParams{RunID: r.PathValue("id")})
	if err != nil {
		if ctx.Err() != nil {
			return // the client went away or the server is closing
		}
		s.writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleEvents: GET /v1/runs/{id}/events?after=N&limit=M → a JSON array
// of UES events exactly as recorded; header Drover-More: true when more
// events follow the last one.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := protocol.EventsParams{RunID: r.PathValue("id")}
	var err error
	if p.AfterSeq, err = intParam(q.Get("after")); err != nil {
		s.writeErr(w, err)
		return
	}
	n, err := intParam(q.Get("limit"))
	if err != nil {
		s.writeErr(w, err)
		return
	}
	p.Limit = int(n)
	res, err := s.ps.Events(r.Context(), p)
	if err != nil {
		s.writeErr(w, err)
		return
	}
	if res.More {
		w.Header().Set("Drover-More", "true")
	}
	writeJSON(w, http.StatusOK, res.Events)
}

func intParam(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, &protocol.Error{Code: protocol.CodeValidation, Message: fmt.Sprintf("%q: want a non-negative integer", v)}
	}
	return n, nil
}

// requestContext is the request's context, also ended by Close.
func (s *Server) requestContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
