package fakemodel

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// maxBody is the largest request body accepted; larger ones get a 413.
const maxBody = 32 << 20

// Server is drover's scripted model server. It answers model API requests
// from a Script, logs every request, and serves:
//
//	POST /v1/messages               Anthropic Messages (SSE when the body has "stream":true, else JSON); any query string
//	POST /v1/messages/count_tokens  {"input_tokens":N}
//	POST /v1/responses              OpenAI Responses (SSE when "stream":true, else JSON)
//	POST /v1/chat/completions       OpenAI Chat Completions (SSE chunks and [DONE] when "stream":true, else JSON)
//	POST /v1beta/models/M:streamGenerateContent  Gemini, SSE
//	POST /v1beta/models/M:generateContent        Gemini, JSON
//	POST /v1beta/models/M:countTokens            {"totalTokens":N}
//	HEAD / and GET /                200
//	GET  /_fakemodel/requests       the request log as a JSON array
//	PUT  /_fakemodel/script         replace the script (body: script JSON)
//
// Any other path gets a 404 with a JSON error body. Every request except
// those to /_fakemodel/ is logged. A Server is safe for concurrent use.
type Server struct {
	prog atomic.Pointer[program]

	// ctx ends when the server closes; every request's context is derived
	// from it so Close aborts requests sleeping in a delay or mid-stream.
	ctx    context.Context
	cancel context.CancelFunc

	mu        sync.Mutex
	closed    bool
	srv       *http.Server
	url       string
	serveDone chan struct{}
	serveErr  error // set before serveDone is closed
	// handlers counts ServeHTTP calls in flight; conns counts the
	// connections of srv until net/http has finished with them (live holds
	// them, so Close can close any that srv.Close missed). handlers is only
	// added to while !closed, conns only before srv.Serve returns, so
	// Close's Waits never race an Add.
	handlers sync.WaitGroup
	conns    sync.WaitGroup
	connMu   sync.Mutex
	live     map[net.Conn]struct{}

	logMu sync.Mutex
	log   []Request
	logw  io.Writer
}

// Request is one logged request.
type Request struct {
	Time time.Time `json:"time"`
	// Method is the HTTP method; Path the request path with any query string.
	Method string `json:"method"`
	Path   string `json:"path"`
	// API is the vendor API of the endpoint ("anthropic", "openai-responses",
	// "openai-chat", "gemini"), "" for other paths.
	API    string `json:"api,omitempty"`
	Model  string `json:"model,omitempty"`
	Stream bool   `json:"stream,omitempty"`
	// Prompt is the text the rules were matched against: the last user text
	// of the prompt message.
	Prompt string `json:"prompt,omitempty"`
	// UserTexts are all user texts of the conversation, oldest first,
	// without <system-reminder> blocks; they show whether a resumed run
	// received its history. Text the user sent while a tool ran (Claude
	// Code passes it in a mid-conversation system message) is included; it
	// is not the prompt, so the running turn's steps continue.
	UserTexts []string `json:"userTexts,omitempty"`
	// ToolsOffered are the names of the tools the request offers.
	ToolsOffered []string `json:"toolsOffered,omitempty"`
	// ToolResults are the tool results after the prompt message.
	ToolResults []ToolResult `json:"toolResults,omitempty"`
	// Aux marks an auxiliary request, answered without the script: "title"
	// (OpenCode's title request: no tools, a title-generator prompt) or
	// "json-schema" (a Gemini generateContent request for structured output,
	// such as its model router's classifier).
	Aux string `json:"aux,omitempty"`
	// Rule is the name of the matching rule ("rules[i]" when unnamed; ""
	// when none matched); Step the index of the step that answered.
	Rule string `json:"rule,omitempty"`
	Step int    `json:"step"`
	// Status is the HTTP status sent; 0 when the request ended before any
	// (the client went away or the server closed during a delay).
	Status int `json:"status"`
	// Resolution says, per tool call, which tool an intent resolved to:
	// "shell:Bash", "write:Write", "name:mcp__echo__echo", with
	// ":not-offered" appended when the request did not offer that tool.
	Resolution []string `json:"resolution,omitempty"`
	// Body is the request body: its JSON, or a JSON string when it is not
	// JSON; nil when empty.
	Body json.RawMessage `json:"body,omitempty"`
}

// ToolResult is a tool result the client sent back.
type ToolResult struct {
	ToolUseID string `json:"toolUseId"`
	// Content is the result's text; a result given as blocks has its text
	// blocks joined with "\n" and other blocks shown as "[type]".
	Content string `json:"content"`
	IsError bool   `json:"isError,omitempty"`
}

// New returns a server answering from script; nil means [DefaultScript].
// It panics if script is invalid (as [ParseScript] would report; a parsed
// script is always valid). Start it with [Server.Start], or mount
// [Server.Handler] on a server of your own; either way call [Server.Close].
func New(script *Script) *Server {
	s := &Server{}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.SetScript(script)
	return s
}

// SetScript replaces the script for requests that arrive afterwards; nil
// means [DefaultScript]. It panics if script is invalid, like [New]. The
// server keeps its own copy, so later changes to script have no effect.
// Safe to call concurrently with requests.
func (s *Server) SetScript(script *Script) {
	if script == nil {
		script = DefaultScript()
	}
	p, err := compile(script)
	if err != nil {
		panic(err.Error())
	}
	s.prog.Store(p)
}

// SetLog makes the server also append each logged request to w as one JSON
// line (w == nil stops it). Writes are serialized; write errors are
// ignored.
func (s *Server) SetLog(w io.Writer) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.logw = w
}

// Start listens on addr ("" means "127.0.0.1:0") and serves in a goroutine
// the Server owns until [Server.Close]. It returns the base URL,
// "http://127.0.0.1:PORT" (no /v1 suffix), which is what ANTHROPIC_BASE_URL
// wants. Only loopback hosts are accepted ("localhost", 127.0.0.0/8, ::1):
// the server has no authentication. Start fails if the server was already
// started or closed.
func (s *Server) Start(addr string) (string, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("fakemodel: start: %w", err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return "", fmt.Errorf("fakemodel: start: %q is not a loopback address; the fake model server only listens on 127.0.0.1, ::1 or localhost", addr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return "", errors.New("fakemodel: start: server is closed")
	case s.srv != nil:
		return "", errors.New("fakemodel: start: server already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("fakemodel: start: %w", err)
	}
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return s.ctx },
		ConnState:         s.trackConn,
	}
	s.srv = srv
	s.url = "http://" + ln.Addr().String()
	s.serveDone = make(chan struct{})
	go func() {
		defer close(s.serveDone)
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			s.serveErr = err
		}
	}()
	return s.url, nil
}

func (s *Server) trackConn(c net.Conn, state http.ConnState) {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	switch state {
	case http.StateNew:
		if s.live == nil {
			s.live = map[net.Conn]struct{}{}
		}
		s.live[c] = struct{}{}
		s.conns.Add(1)
	case http.StateClosed, http.StateHijacked:
		delete(s.live, c)
		s.conns.Done()
	}
}

// URL returns the base URL [Server.Start] returned, or "" before Start.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.url
}

// Handler returns the server's HTTP handler, for mounting it elsewhere (for
// example in httptest.NewServer). Its requests are aborted and waited for by
// [Server.Close] too.
func (s *Server) Handler() http.Handler { return s }

// Close stops the server: it stops listening, aborts in-flight requests
// (including ones sleeping in a step's delay or streaming), and waits until
// every request handler and, after Start, every connection and the serving
// goroutine are finished. Requests arriving afterwards through Handler get a
// 503. Close is idempotent; only the first call can return an error.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	srv, done := s.srv, s.serveDone
	s.mu.Unlock()

	s.cancel()
	var err error
	if srv != nil {
		err = srv.Close()
		<-done
		if err == nil {
			err = s.serveErr
		}
	}
	s.handlers.Wait()
	if srv != nil {
		// srv.Close closes the connections it tracks; one accepted just as
		// it ran may have escaped it and would wait for a request.
		s.connMu.Lock()
		for c := range s.live {
			_ = c.Close()
		}
		s.connMu.Unlock()
		s.conns.Wait()
	}
	return err
}

// Requests returns a copy of the request log, oldest first.
func (s *Server) Requests() []Request {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	out := make([]Request, len(s.log))
	for i, r := range s.log {
		r.UserTexts = slices.Clone(r.UserTexts)
		r.ToolsOffered = slices.Clone(r.ToolsOffered)
		r.ToolResults = slices.Clone(r.ToolResults)
		r.Resolution = slices.Clone(r.Resolution)
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

func (s *Server) record(r *Request) {
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.log = append(s.log, *r)
	if s.logw != nil {
		if line, err := json.Marshal(r); err == nil {
			_, _ = s.logw.Write(append(line, '\n'))
		}
	}
}

// enter registers a request handler; false once the server is closed.
func (s *Server) enter() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.handlers.Add(1)
	return true
}

// ServeHTTP implements http.Handler; see [Server] for the endpoints.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		http.Error(w, "fakemodel: server closed", http.StatusServiceUnavailable)
		return
	}
	defer s.handlers.Done()
	// With Handler mounted elsewhere, r's context does not end on Close;
	// tie it to the server's.
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	stop := context.AfterFunc(s.ctx, cancel)
	defer stop()
	r = r.WithContext(ctx)

	if strings.HasPrefix(r.URL.Path, "/_fakemodel/") {
		s.serveControl(w, r)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	rec := &Request{Time: time.Now(), Method: r.Method, Path: r.URL.RequestURI()}
	// Deferred so that aborted requests (panic(http.ErrAbortHandler)) are
	// logged too.
	defer func() {
		rec.Status = sw.status
		s.record(rec)
	}()
	s.dispatch(sw, r, rec)
}

func (s *Server) dispatch(w http.ResponseWriter, r *http.Request, rec *Request) {
	p := r.URL.Path
	if p == "/" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, "fakemodel: drover's scripted model server\n")
		}
		return
	}
	for _, wi := range wires {
		for _, ep := range wi.endpoints() {
			if !ep.matches(p) {
				continue
			}
			rec.API = wi.name()
			body, status, err := readBody(w, r)
			rec.Body = logBody(body)
			if err != nil {
				wi.writeError(w, status, err.Error())
				return
			}
			if r.Method != ep.method {
				w.Header().Set("Allow", ep.method)
				wi.writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("fakemodel: %s %s: method not allowed (use %s)", r.Method, p, ep.method))
				return
			}
			if ep.serve != nil {
				ep.serve(s, w, r, body, rec)
			} else {
				s.serveTurn(w, r, wi, body, rec)
			}
			return
		}
	}
	body, _, _ := readBody(w, r)
	rec.Body = logBody(body)
	writeAnthropicError(w, http.StatusNotFound, fmt.Sprintf("fakemodel: no endpoint %s %s", r.Method, p))
}

// serveTurn answers a model request from the script.
func (s *Server) serveTurn(w http.ResponseWriter, r *http.Request, wi wire, body []byte, rec *Request) {
	x, err := wi.decode(r, body)
	if err != nil {
		wi.writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	rec.Model, rec.Stream, rec.Prompt = x.model, x.stream, x.prompt
	x.apiKey = requestAPIKey(r)
	rec.UserTexts, rec.ToolsOffered, rec.ToolResults = x.userTexts, x.toolsOffered, x.toolResults

	if x.aux != "" {
		rec.Aux = x.aux
		wi.writeAnswer(r.Context(), w, x, &answer{text: x.auxText, usage: Usage{Input: 10, Output: 5}})
		return
	}
	a := s.prog.Load().resolve(x, wi.tools())
	rec.Rule, rec.Step = a.rule, a.step
	for _, c := range a.calls {
		rec.Resolution = append(rec.Resolution, c.resolution)
	}
	ctx := r.Context()
	if !sleep(ctx, a.delay) {
		// The client is gone or the server is closing: nobody to answer.
		panic(http.ErrAbortHandler)
	}
	if a.err != nil {
		wi.writeError(w, a.err.Status, a.err.Message)
		return
	}
	wi.writeAnswer(ctx, w, x, a)
}

// requestAPIKey returns the API key r carries, the way each vendor API
// sends one: x-api-key (Anthropic), Authorization: Bearer (OpenAI),
// x-goog-api-key or the key query parameter (Gemini); "" for none.
func requestAPIKey(r *http.Request) string {
	if k := r.Header.Get("x-api-key"); k != "" {
		return k
	}
	if k, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return strings.TrimSpace(k)
	}
	if k := r.Header.Get("x-goog-api-key"); k != "" {
		return k
	}
	return r.URL.Query().Get("key")
}

// serveControl serves /_fakemodel/: the request log and script replacement.
func (s *Server) serveControl(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/_fakemodel/requests" && r.Method == http.MethodGet:
		writeJSON(w, http.StatusOK, s.Requests())
	case r.URL.Path == "/_fakemodel/script" && r.Method == http.MethodPut:
		body, status, err := readBody(w, r)
		if err != nil {
			writeAnthropicError(w, status, err.Error())
			return
		}
		script, err := ParseScript(body)
		if err != nil {
			writeAnthropicError(w, http.StatusBadRequest, err.Error())
			return
		}
		s.SetScript(script)
		writeJSON(w, http.StatusOK, map[string]any{"rules": len(script.Rules)})
	default:
		writeAnthropicError(w, http.StatusNotFound,
			fmt.Sprintf("fakemodel: no endpoint %s %s (have GET /_fakemodel/requests, PUT /_fakemodel/script)", r.Method, r.URL.Path))
	}
}

// readBody reads the request body, at most maxBody bytes (after gzip
// decoding, when the client compressed it). On error it returns the HTTP
// status to answer.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	var src io.Reader = http.MaxBytesReader(w, r.Body, maxBody)
	if strings.EqualFold(r.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(src)
		if err != nil {
			return nil, http.StatusBadRequest, fmt.Errorf("fakemodel: gzip body: %w", err)
		}
		src = io.LimitReader(zr, maxBody+1)
	}
	body, err := io.ReadAll(src)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig), len(body) > maxBody:
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("fakemodel: request body exceeds %d bytes", maxBody)
	case err != nil:
		return nil, http.StatusBadRequest, fmt.Errorf("fakemodel: read body: %w", err)
	}
	return body, 0, nil
}

// logBody is body as it goes into the log: JSON as is, anything else as a
// JSON string.
func logBody(body []byte) json.RawMessage {
	if len(body) == 0 {
		return nil
	}
	if json.Valid(body) {
		return body
	}
	b, _ := json.Marshal(string(body))
	return b
}

// statusWriter records the status sent.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer (Flush).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// Serve runs a server for the drover CLI: it starts one on addr (see
// [Server.Start]) answering from script (nil means [DefaultScript]),
// appends the request log to logw as JSON lines when logw is non-nil, calls
// ready with the base URL once it is listening, and serves until ctx is
// cancelled. It returns nil after a cancellation, and an error when the
// script is invalid or the server cannot start or fails.
func Serve(ctx context.Context, addr string, script *Script, logw io.Writer, ready func(url string)) error {
	if script != nil {
		if _, err := compile(script); err != nil {
			return err
		}
	}
	s := New(script)
	if logw != nil {
		s.SetLog(logw)
	}
	url, err := s.Start(addr)
	if err != nil {
		_ = s.Close()
		return err
	}
	if ready != nil {
		ready(url)
	}
	select {
	case <-ctx.Done():
	case <-s.serveDone:
	}
	return s.Close()
}
