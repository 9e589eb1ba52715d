package protocol

import (
	"log/slog"
	"time"

	"github.com/drover-run/drover/api"
)

// Config tunes a Server; zero fields take the defaults.
type Config struct {
	// QueueSize bounds each connection's outbound queue, in lines; 0 means
	// 1024. A subscription that finds it full pauses and sends "lagged".
	QueueSize int
	// MaxInFlight bounds the requests one connection may have running at
	// once (awaits block); 0 means 256. Past it the connection stops
	// reading until one ends.
	MaxInFlight int
	// MaxLine is the longest request line accepted, in bytes; 0 means
	// 16 MiB. A longer line gets INVALID_REQUEST and is skipped.
	MaxLine int
	// Poll is how soon a subscription retries a ledger read that failed;
	// 0 means 1 s.
	Poll time.Duration
	// ShutdownGrace is how long Conn.Shutdown lets awaits and
	// subscriptions go on after the connection's own runs have ended, so
	// that their last responses and events are sent; 0 means 2 s.
	ShutdownGrace time.Duration
	// Client names the transport in what it records of its clients' answers
	// and steering when a client names nobody; "" means "protocol".
	Client string
	// Ops are the operations served; nil means api.Ops.
	Ops []api.Op
	// Authenticate, when set, maps a run's nested-run token to the run
	// (runs.Supervisor.TokenRun): ServeNested serves only with it.
	Authenticate func(token string) (runID string, ok bool)
	// Logger receives what the server cannot tell a client: failed ledger
	// reads of a subscription (retried), requests that failed inside
	// drover. nil means none (quiet).
	Logger *slog.Logger
}

// Server serves the protocol over a service: what its connections share.
// It holds no per-connection state.
type Server struct {
	log *slog.Logger
	svc api.Service
	cfg Config
	ops map[string]opFunc
}

// NewServer returns a server over svc.
func NewServer(svc api.Service, cfg Config) *Server {
	if cfg.QueueSize <= 0 {
		cfg.QueueSize = 1024
	}
	if cfg.MaxInFlight <= 0 {
		cfg.MaxInFlight = 256
	}
	if cfg.MaxLine <= 0 {
		cfg.MaxLine = 16 << 20
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = 2 * time.Second
	}
	if cfg.Client == "" {
		cfg.Client = "protocol"
	}
	if cfg.Ops == nil {
		cfg.Ops = api.Ops
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{log: log, svc: svc, cfg: cfg}
	s.ops = opsOf(cfg.Ops)
	return s
}

// Service returns the service the server serves.
func (s *Server) Service() api.Service { return s.svc }
