package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/metrics"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newServeCmd(e *env) *cobra.Command {
	var db, addr, token, fakeScript, fakeLog, metricsAddr string
	var notifyTo []string
	var stdio, fakeOn, noToken, allowAutonomous, queue bool
	var limit int
	var approvalTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve [--stdio | --addr HOST:PORT]",
		Short: "Serve the client protocol over HTTP, or on stdin and stdout",
		Long: `Serve drover's client protocol. Runs are recorded in the ledger like
'drover run' records them.

Without --stdio, drover serves HTTP (docs/http.md): JSON endpoints under /v1,
Server-Sent Events streams of runs' events, and a web dashboard at /
(docs/dashboard.md). It binds 127.0.0.1:8765 unless told otherwise (--addr).
Every request needs "Authorization: Bearer <token>" (the dashboard signs in
with it): the token is --token, else DROVER_TOKEN (which 'ps' does not
show), else a new random one printed with the dashboard's address. With
--no-token, on loopback only, requests are served only when they name a
loopback host (no DNS rebinding). Clients cannot start autonomous runs, nor
widen a run beyond its tier (contain: false, an allow rule for every tool, a
binary, env), unless --allow-autonomous says so (docs/security.md). SIGINT or SIGTERM ends the
streams, cancels the runs and exits 130.

Prometheus metrics of the runs this server executes are at GET /metrics,
behind the same token (docs/telemetry.md); --metrics-addr also serves them,
without a token, on a loopback address of their own (with --stdio too).

With --stdio (docs/protocol.md): one JSON request a line on stdin, one JSON
response or event a line on stdout. When stdin ends, drover cancels the runs
this connection started (a program that went away leaves no orphans),
answers what is still in flight and exits 0. SIGINT or SIGTERM does the same
and exits 130; a second one kills every agent process group at once.`,
		Example: `  drover serve
  export DROVER_TOKEN=$(openssl rand -hex 16); drover serve &
  curl -s -H "Authorization: Bearer $DROVER_TOKEN" -XPOST localhost:8765/v1/runs -d '{"agent":"claude","prompt":"explain main.go"}'
  curl -N -H "Authorization: Bearer $DROVER_TOKEN" localhost:8765/v1/runs/run_…/stream

  drover serve --fakemodel    # offline: every run talks to the scripted model server

  DROVER_TOKEN=$(openssl rand -hex 16) drover serve --addr 0.0.0.0:8765

  drover serve --stdio
  {"id":1,"op":"run","agent":"claude","prompt":"explain main.go"}
  {"id":2,"op":"subscribe","runs":["run_…"]}
  {"id":3,"op":"await","runId":"run_…"}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if err := e.localOnly("serve"); err != nil {
				return err
			}
			if stdio && (cmd.Flags().Changed("addr") || cmd.Flags().Changed("token") || noToken) {
				return usagef("--stdio does not take --addr, --token or --no-token")
			}
			if noToken && cmd.Flags().Changed("token") {
				return usagef("--token and --no-token exclude each other")
			}
			if metricsAddr != "" {
				if err := checkMetricsAddr(metricsAddr); err != nil {
					return err
				}
			}
			generated := false
			if !stdio {
				if token == "" && !noToken {
					token = os.Getenv("DROVER_TOKEN")
				}
				// A non-loopback address needs a token given on purpose.
				if err := server.CheckAddr(addr, token); err != nil {
					return usagef("%v", err)
				}
				if token == "" && !noToken {
					// A token of this start's own, as notebook servers do:
					// on loopback too, only who reads it from this terminal
					// (or is handed the dashboard address) can drive runs.
					token, generated = newToken(), true
				}
			}
			if queue && (fakeOn || fakeScript != "" || fakeLog != "") {
				return usagef("--queue runs nothing here: give --fakemodel to the workers (drover worker --fakemodel)")
			}
			if approvalTimeout < 0 {
				return usagef("--approval-timeout must not be negative")
			}
			fake, err := newOffline(fakeOn, fakeScript, fakeLog)
			if err != nil {
				return err
			}
			rcfg := runs.Config{Limit: limit, DefaultApprovalTimeout: approvalTimeout}
			n, err := e.notifier(notifyTo)
			if err != nil {
				return err
			}
			defer closeNotifier(n)
			if n != nil {
				rcfg.Notifier = n
			}
			if queue {
				rcfg.Queue = queueWanted{}
			}
			acfg := api.Config{Logger: e.log, AllowAutonomous: allowAutonomous}
			if !queue {
				// A queueing server leaves names to its workers, which
				// run them with their own profiles.
				acfg.Profiles = resolveProfiles
			}
			if fake != nil {
				apply, stop, err := fake.start(e, true)
				if err != nil {
					return err
				}
				defer stop()
				acfg.Defaults = apply
			}
			var m *metrics.Metrics
			if !stdio || metricsAddr != "" {
				m = metrics.New(e.log)
				rcfg.Observer = m
			}
			if metricsAddr != "" {
				stop, err := serveMetrics(e, metricsAddr, m.Handler())
				if err != nil {
					return err
				}
				defer stop()
			}
			if stdio {
				return serveStdio(ctx, e, db, rcfg, acfg)
			}
			return serveHTTP(ctx, e, db, rcfg, addr, token, generated, acfg, m)
		},
	}
	addDBFlag(cmd, &db)
	addNotifyFlag(cmd, &notifyTo)
	cmd.Flags().BoolVar(&stdio, "stdio", false, "speak the protocol on stdin and stdout instead of HTTP")
	cmd.Flags().StringVar(&addr, "addr", server.DefaultAddr, "HTTP address to listen on")
	cmd.Flags().StringVar(&token, "token", "", "bearer token every HTTP request must carry (default $DROVER_TOKEN, else a new random one, printed)")
	cmd.Flags().BoolVar(&noToken, "no-token", false, "serve loopback without a token (only requests naming a loopback host are served)")
	cmd.Flags().BoolVar(&allowAutonomous, "allow-autonomous", false, "let clients start autonomous runs and widen runs beyond their tier: contain false, allow-all rules, binary, env (refused otherwise)")
	cmd.Flags().IntVar(&limit, "limit", 8, "runs that may run at once; more wait as pending")
	cmd.Flags().DurationVar(&approvalTimeout, "approval-timeout", 0, "how long the permission requests of runs that name no approvalTimeout wait for a client's answer (the dashboard, respond, drover approve); 0: denied at once unless a rule allows")
	cmd.Flags().BoolVar(&queue, "queue", false, "queue the runs clients start for drover workers instead of running them here (a PostgreSQL ledger; docs/scale-out.md)")
	cmd.Flags().BoolVar(&fakeOn, "fakemodel", false, "point every run that names no endpoint at drover's built-in scripted model server (offline)")
	cmd.Flags().StringVar(&fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	cmd.Flags().StringVar(&fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	addMetricsFlag(cmd, &metricsAddr)
	return cmd
}

func serveStdio(ctx context.Context, e *env, db string, rcfg runs.Config, acfg api.Config) error {
	return e.withLedger(ctx, db, rcfg, func(sup *runs.Supervisor, st store.Store) error {
		srv := protocol.NewServer(api.NewLocal(sup, acfg), protocol.Config{Logger: e.log})
		// stdin is hidden behind a plain io.Reader: a Read in
		// progress cannot be interrupted, so on a signal Serve
		// leaves it behind and the process exits.
		err := protocol.Serve(ctx, srv, struct{ io.Reader }{e.stdin}, e.stdout)
		if errors.Is(err, context.Canceled) {
			return exitError{ExitInterrupted}
		}
		return err
	})
}

// serveHTTP serves until ctx ends (a signal), then ends the streams and
// awaits in progress, lets other requests finish for a moment, and exits
// 130; withLedger then cancels the runs still going.
func serveHTTP(ctx context.Context, e *env, db string, rcfg runs.Config, addr, token string, generated bool, acfg api.Config, m *metrics.Metrics) error {
	return e.withLedger(ctx, db, rcfg, func(sup *runs.Supervisor, st store.Store) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		hs := server.New(api.NewLocal(sup, acfg), server.Config{Token: token, Logger: e.log, Metrics: m.Handler()})
		h := hs.HTTPServer()
		fmt.Fprintf(e.stderr, "drover: serving HTTP on http://%s\n", ln.Addr())
		switch {
		case token == "":
			fmt.Fprintf(e.stderr, "drover: dashboard at http://%s/ (no token: requests for loopback host names only)\n", ln.Addr())
		case generated:
			fmt.Fprintf(e.stderr, "drover: dashboard at http://%s/#token=%s\n", ln.Addr(), token)
			fmt.Fprintf(e.stderr, "drover: API token %s (Authorization: Bearer …; --no-token or DROVER_TOKEN to choose otherwise)\n", token)
		default:
			fmt.Fprintf(e.stderr, "drover: dashboard at http://%s/#token=<token> (or sign in with the token there)\n", ln.Addr())
		}
		if acfg.AllowAutonomous {
			fmt.Fprintln(e.stderr, "drover: clients may start autonomous runs (--allow-autonomous)")
		}
		served := make(chan error, 1)
		go func() { served <- h.Serve(ln) }()
		select {
		case err := <-served:
			hs.Close()
			return err
		case <-ctx.Done():
		}
		hs.Close()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Shutdown(sctx); err != nil {
			h.Close()
		}
		if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return exitError{ExitInterrupted}
	})
}

// newToken returns a random token for one start of the server.
func newToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported platforms
	}
	return hex.EncodeToString(b[:])
}
