package runs

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
)

// Variables a run's agent processes find in their environment when the
// supervisor serves nested runs (ServeNested): how a drover started inside
// the run (a nested `drover mcp`) reaches the drover that runs it, instead
// of opening the ledger itself, which a contained run cannot write (BND-3).
const (
	// EnvSocket names the unix socket of the supervisor's nested-run
	// endpoint.
	EnvSocket = "DROVER_SOCKET"
	// EnvRunToken holds the run's own secret: what a connection presents
	// to be scoped to that run (see Supervisor.TokenRun). It is never
	// recorded: not in the ledger, the events or the logs.
	EnvRunToken = "DROVER_RUN_TOKEN"
)

// NestedHandler serves one connection to the nested-run endpoint. ctx
// ends when the supervisor closes, and the connection is closed then too;
// the handler must return soon after either. The supervisor closes conn
// once the handler has returned.
type NestedHandler func(ctx context.Context, conn net.Conn)

// nested is a supervisor's nested-run endpoint: one listener, the
// connections it accepted, and the tokens of the runs going on.
type nested struct {
	dir, path string
	ln        *net.UnixListener
	handler   NestedHandler

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	tokens map[[sha256.Size]byte]string // hash of a run's token → run id
	byRun  map[string][sha256.Size]byte
}

// maxSocketPath is the longest path a unix socket may have on every
// system drover builds for (sockaddr_un.sun_path, less its terminator).
const maxSocketPath = 103

// ServeNested opens the supervisor's nested-run endpoint: a unix socket in
// a new directory only this user may enter (under os.TempDir, or /tmp when
// that path would be too long for a socket), never inside a run's
// workspace. Every run started after it gets EnvSocket and its own
// EnvRunToken in its agents' environment; each connection is handed to h
// on a goroutine of its own. Close stops accepting, closes the
// connections, waits for the handlers and removes the socket and its
// directory. It returns the socket's path; calling it twice is an error,
// as is a closed supervisor (ErrClosed).
func (s *Supervisor) ServeNested(h NestedHandler) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return "", ErrClosed
	case s.nested != nil:
		return "", errors.New("nested runs are already served")
	}
	base := os.TempDir()
	if len(filepath.Join(base, "drover-0123456789", "s")) > maxSocketPath {
		base = "/tmp"
	}
	// MkdirTemp makes the directory 0700: other users cannot reach the
	// socket, whatever its own mode.
	dir, err := os.MkdirTemp(base, "drover-")
	if err != nil {
		return "", fmt.Errorf("nested runs: %w", err)
	}
	path := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", fmt.Errorf("nested runs: %w", err)
	}
	ln.SetUnlinkOnClose(true)
	n := &nested{dir: dir, path: path, ln: ln, handler: h, conns: map[net.Conn]struct{}{},
		tokens: map[[sha256.Size]byte]string{}, byRun: map[string][sha256.Size]byte{}}
	s.nested = n
	s.wg.Go(func() { s.acceptNested(n) })
	// Accept blocks until the listener closes: closing it (and every
	// connection, whose handlers may be blocked reading) when the
	// supervisor's context ends is what lets Close's Wait return.
	s.wg.Go(func() {
		<-s.ctx.Done()
		_ = ln.Close()
		n.mu.Lock()
		defer n.mu.Unlock()
		for c := range n.conns {
			_ = c.Close()
		}
	})
	return path, nil
}

// acceptNested hands each connection to the handler until the listener
// closes.
func (s *Supervisor) acceptNested(n *nested) {
	for {
		conn, err := n.ln.Accept()
		if err != nil {
			if s.ctx.Err() == nil {
				s.log.Error("nested runs: accept failed; no more nested connections", "socket", n.path, "err", err)
			}
			return
		}
		n.mu.Lock()
		if s.ctx.Err() != nil {
			n.mu.Unlock()
			_ = conn.Close()
			return
		}
		n.conns[conn] = struct{}{}
		n.mu.Unlock()
		s.wg.Go(func() {
			defer func() {
				n.mu.Lock()
				delete(n.conns, conn)
				n.mu.Unlock()
				_ = conn.Close()
			}()
			n.handler(s.ctx, conn)
		})
	}
}

// NestedSocket returns the path of the nested-run endpoint's socket, ""
// when the supervisor does not serve nested runs.
func (s *Supervisor) NestedSocket() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nested == nil {
		return ""
	}
	return s.nested.path
}

// TokenRun returns the id of the run whose EnvRunToken token is, while
// that run is going; false for any other string (a run that ended, a
// token of another supervisor, a guess). Tokens are compared by their
// SHA-256, so the time a lookup takes says nothing about a token's bytes.
func (s *Supervisor) TokenRun(token string) (string, bool) {
	s.mu.Lock()
	n := s.nested
	s.mu.Unlock()
	if n == nil || token == "" {
		return "", false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	id, ok := n.tokens[sha256.Sum256([]byte(token))]
	return id, ok
}

// nestedEnv adds EnvSocket and a new token for run id to env, when the
// supervisor serves nested runs. The token lives until forgetToken.
func (s *Supervisor) nestedEnv(id string, env map[string]string) {
	s.mu.Lock()
	n := s.nested
	s.mu.Unlock()
	if n == nil {
		return
	}
	var b [32]byte // 256 bits
	_, _ = rand.Read(b[:])
	token := hex.EncodeToString(b[:])
	h := sha256.Sum256([]byte(token))
	n.mu.Lock()
	if old, ok := n.byRun[id]; ok {
		delete(n.tokens, old)
	}
	n.tokens[h], n.byRun[id] = id, h
	n.mu.Unlock()
	env[EnvSocket], env[EnvRunToken] = n.path, token
}

// forgetToken ends run id's token: a connection can no longer present it.
func (s *Supervisor) forgetToken(id string) {
	s.mu.Lock()
	n := s.nested
	s.mu.Unlock()
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if h, ok := n.byRun[id]; ok {
		delete(n.tokens, h)
		delete(n.byRun, id)
	}
}

// removeNested removes the endpoint's directory once every goroutine of
// the supervisor has ended (Close): the listener removed its socket.
func (s *Supervisor) removeNested() {
	s.mu.Lock()
	n := s.nested
	s.mu.Unlock()
	if n == nil {
		return
	}
	if err := os.RemoveAll(n.dir); err != nil {
		s.log.Warn("nested runs: could not remove the socket's directory", "dir", n.dir, "err", err)
	}
}
