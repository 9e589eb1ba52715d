package server

import (
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Wrong tokens a client may present: a burst of guessBurst, then one per
// guessEvery. A client past that is answered 429 without its token being
// compared, so guessing a token takes forever (SEC-1).
const (
	guessBurst = 10
	guessEvery = time.Second
	// maxGuessers bounds the clients remembered; past it they are all
	// forgotten, which gives each a new burst at worst.
	maxGuessers = 4096
)

// guesses limits the wrong tokens each client host presents.
type guesses struct {
	mu sync.Mutex
	by map[string]*rate.Limiter
}

func newGuesses() *guesses {
	return &guesses{by: map[string]*rate.Limiter{}}
}

// limiter returns r's client's limiter.
func (g *guesses) limiter(r *http.Request) *rate.Limiter {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	l := g.by[host]
	if l == nil {
		if len(g.by) >= maxGuessers {
			clear(g.by)
		}
		l = rate.NewLimiter(rate.Every(guessEvery), guessBurst)
		g.by[host] = l
	}
	return l
}

// mayTry reports whether r's client may present a token now.
func (g *guesses) mayTry(r *http.Request) bool {
	return g.limiter(r).Tokens() >= 1
}

// wrong counts a wrong token r's client presented.
func (g *guesses) wrong(r *http.Request) { g.limiter(r).Allow() }

// tooMany answers a client that guessed too often.
func tooMany(w http.ResponseWriter) {
	w.Header().Set("Retry-After", "1")
	writeError(w, http.StatusTooManyRequests, CodeTooManyRequests, "too many wrong tokens from this address: wait and try again")
}
