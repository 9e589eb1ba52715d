// Package server is drover's HTTP face (docs/requirements.md §8, PRO-3,
// API-1): the operations of api.Service as JSON endpoints, one per route
// of api.Ops, plus Server-Sent Events streams of its streams (runs' UES
// events, the ledger's log, run records), and the dashboard (PRO-4). It
// decides nothing: every operation is the service's. Client is the other
// side, an api.Service over HTTP: what `drover --server` uses (API-2).
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
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/api"
)

// OpenAPI is the OpenAPI 3.1 description of the endpoints, as JSON.
//
//go:embed openapi.json
var OpenAPI []byte

// Error codes of the HTTP layer itself, besides the service's.
const (
	CodeUnauthorized = api.CodeUnauthorized
	CodeForbidden    = "FORBIDDEN"
	CodeTooLarge     = "REQUEST_TOO_LARGE"
	// CodeTooManyRequests answers a client that presented too many wrong
	// tokens (429).
	CodeTooManyRequests = "TOO_MANY_REQUESTS"
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
	// Ops are the operations served, each at its routes; nil means api.Ops.
	Ops []api.Op
	// Metrics, when set, is served at GET /metrics, behind the token like
	// every endpoint (OBS-2: Prometheus's text format,
	// docs/telemetry.md).
	Metrics http.Handler
	// Logger receives what the server cannot tell a client: failed ledger
	// reads of a stream (retried), requests that failed inside drover.
	// nil means none (quiet).
	Logger *slog.Logger
}

// Server serves the HTTP endpoints. Create it with New; its Handler is an
// http.Handler. Close ends the streams in progress.
type Server struct {
	log  *slog.Logger
	svc  api.Service
	cfg  Config
	mux  *http.ServeMux
	h    http.Handler
	done chan struct{}
	once sync.Once
	// guesses limits the wrong tokens each client presents.
	guesses *guesses
}

// New returns a server of svc.
func New(svc api.Service, cfg Config) *Server {
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
	if cfg.Ops == nil {
		cfg.Ops = api.Ops
	}
	s := &Server{svc: svc, cfg: cfg, log: log, mux: http.NewServeMux(), done: make(chan struct{}), guesses: newGuesses()}
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
	for _, op := range s.cfg.Ops {
		for _, route := range op.Routes {
			m.HandleFunc(route, s.opHandler(op, route))
		}
	}
	m.HandleFunc("GET /v1/runs/{runId}/stream", s.handleStream)
	m.HandleFunc("GET /v1/stream", s.handleStreamAll)
	m.HandleFunc("GET /v1/runs/stream", s.handleRunsStream)
	m.HandleFunc("GET /v1/openapi.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(OpenAPI)
	})
	if s.cfg.Metrics != nil {
		m.Handle("GET /metrics", s.cfg.Metrics)
	}
	s.dashboardRoutes()
}

// auth requires the token when one is configured: a bearer header, or the
// dashboard's cookie (see handleLogin). The dashboard's files and the login
// endpoint are public. A client that presented too many wrong tokens is
// answered 429 until it waits (guesses).
func (s *Server) auth(next http.Handler) http.Handler {
	if s.cfg.Token == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if public(r) {
			next.ServeHTTP(w, r)
			return
		}
		presented := r.Header.Get("Authorization") != "" || hasCookie(r)
		if presented && !s.guesses.mayTry(r) {
			tooMany(w)
			return
		}
		if !s.authorized(r) {
			if presented {
				s.guesses.wrong(r)
			}
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
	Error *api.Error `json:"error"`
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, errorBody{api.Errorf(code, "%s", msg)})
}

// writeErr answers a service error with its HTTP status; a failure of
// drover's own (INTERNAL_ERROR, RUN_FAILED) is also logged.
func (s *Server) writeErr(w http.ResponseWriter, err error) {
	e := api.ErrorOf(err)
	status := Status(e.Code)
	if status >= 500 {
		s.log.Error("request failed", "code", e.Code, "err", e.Message)
	}
	writeJSON(w, status, errorBody{e})
}

// Status is the HTTP status of an error code.
func Status(code string) int {
	switch code {
	case api.CodeInvalidRequest, api.CodeValidation, api.CodeIncompatible:
		return http.StatusBadRequest
	case api.CodeNotFound:
		return http.StatusNotFound
	case api.CodeConflict:
		return http.StatusConflict
	case api.CodeBoundaryViolation:
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
		b, _ = json.Marshal(errorBody{api.Errorf(api.CodeInternal, "%v", err)})
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// opHandler serves op at route: its params from the route's wildcards and
// the query (GET) or the JSON body (POST, optional), strictly; its result
// as JSON, shaped for HTTP where shapes says so. An op that changes
// something is carried out even when the client goes away once it asked;
// one that waits (await) gives up when the client or the server goes.
func (s *Server) opHandler(op api.Op, route string) http.HandlerFunc {
	method, path, _ := strings.Cut(route, " ")
	wildcards := wildcardsOf(path)
	return func(w http.ResponseWriter, r *http.Request) {
		p := op.NewParams()
		if method == http.MethodGet {
			if err := bindQuery(p, r.URL.Query()); err != nil {
				s.writeErr(w, err)
				return
			}
		} else if !s.decodeBody(w, r, p) {
			return
		}
		for _, name := range wildcards {
			setField(p, name, r.PathValue(name))
		}
		ctx := api.WithClient(r.Context(), "http")
		if op.Blocks {
			var cancel context.CancelFunc
			ctx, cancel = s.requestContext(ctx)
			defer cancel()
		} else {
			ctx = context.WithoutCancel(ctx)
		}
		res, err := op.Call(ctx, s.svc, p)
		if err != nil {
			if op.Blocks && ctx.Err() != nil {
				return // the client went away or the server is closing
			}
			s.writeErr(w, err)
			return
		}
		status := http.StatusOK
		if op.Created {
			status = http.StatusCreated
		}
		if sh, ok := shapes[op.Name]; ok {
			res = sh.write(w.Header(), res)
		}
		writeJSON(w, status, res)
	}
}

// decodeBody reads r's body as one JSON value into p, strictly (unknown
// fields refused), within MaxBody; an empty body leaves p as it is. On
// failure it has answered the request and returns false.
func (s *Server) decodeBody(w http.ResponseWriter, r *http.Request, p any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.MaxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(p); err != nil {
		var mb *http.MaxBytesError
		switch {
		case errors.Is(err, io.EOF):
			return true
		case errors.As(err, &mb):
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", mb.Limit))
		default:
			s.writeErr(w, api.Errorf(api.CodeInvalidRequest, "body is not a JSON object of this request's fields: %v", err))
		}
		return false
	}
	if dec.More() {
		s.writeErr(w, api.Errorf(api.CodeInvalidRequest, "body has more than one JSON value"))
		return false
	}
	return true
}

// requestContext is ctx, also ended by Close.
func (s *Server) requestContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	// Owned by the request: it ends when the request's context does,
	// which the handler's deferred cancel guarantees.
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
