package server

import (
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"

	"github.com/drover-run/drover/api"
)

// The dashboard (PRO-4): plain HTML, CSS and JavaScript, embedded so that
// the binary serves it with no build step and no network.
//
//go:embed ui
var uiFS embed.FS

// CookieName is the cookie that carries the token for browsers, which
// cannot put an Authorization header on an EventSource. POST /v1/login
// sets it.
const CookieName = "drover_token"

// dashboardCSP confines the dashboard to its own origin: no inline script,
// no third-party anything, so an event's text can never become code.
const dashboardCSP = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

func (s *Server) dashboardRoutes() {
	sub, err := fs.Sub(uiFS, "ui")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.FileServerFS(sub)
	static := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", dashboardCSP)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	s.mux.Handle("GET /{$}", static)
	s.mux.Handle("GET /app.js", static)
	s.mux.Handle("GET /app.css", static)
	s.mux.HandleFunc("POST /v1/login", s.handleLogin)
}

// public reports whether r may be served without the token: the
// dashboard's own files (they hold no data) and the login endpoint, which
// checks the token itself.
func public(r *http.Request) bool {
	switch r.URL.Path {
	case "/", "/app.js", "/app.css":
		return r.Method == http.MethodGet || r.Method == http.MethodHead
	case "/v1/login":
		return r.Method == http.MethodPost
	}
	return false
}

// hasCookie reports whether r carries the dashboard's cookie.
func hasCookie(r *http.Request) bool {
	_, err := r.Cookie(CookieName)
	return err == nil
}

// authorized reports whether r carries the token, as a bearer header or as
// the dashboard's cookie.
func (s *Server) authorized(r *http.Request) bool {
	if got := r.Header.Get("Authorization"); got != "" {
		return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+s.cfg.Token)) == 1
	}
	if c, err := r.Cookie(CookieName); err == nil {
		tok, err := base64.RawURLEncoding.DecodeString(c.Value)
		return err == nil && subtle.ConstantTimeCompare(tok, []byte(s.cfg.Token)) == 1
	}
	return false
}

// loginRequest is the body of POST /v1/login.
type loginRequest struct {
	Token string `json:"token"`
}

// handleLogin: POST /v1/login {"token":…} → 204 with the token cookie, or
// 401. Without a configured token any body is accepted and no cookie set.
// The cookie is HttpOnly (page scripts never see it) and SameSite=Strict;
// state-changing requests are also guarded by cross-origin protection.
func (s *Server) handleLogin(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	var req loginRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeError(w, http.StatusRequestEntityTooLarge, CodeTooLarge, fmt.Sprintf("request body larger than %d bytes", mb.Limit))
			return
		}
		s.writeErr(w, api.Errorf(api.CodeInvalidRequest, `body is not {"token":"…"}: %v`, err))
		return
	}
	if s.cfg.Token == "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if !s.guesses.mayTry(r) {
		tooMany(w)
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Token), []byte(s.cfg.Token)) != 1 {
		s.guesses.wrong(r)
		writeError(w, http.StatusUnauthorized, CodeUnauthorized, "wrong token")
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name:     CookieName,
		Value:    base64.RawURLEncoding.EncodeToString([]byte(s.cfg.Token)), // any token, as valid cookie bytes
		Path:     "/",
		HttpOnly: true,
		Secure:   r.TLS != nil,
		SameSite: http.SameSiteStrictMode,
	})
	w.WriteHeader(http.StatusNoContent)
}
