package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

func newServeCmd(e *env) *cobra.Command {
	var db, addr, token, fakeScript, fakeLog string
	var stdio, fakeOn bool
	var limit int
	var approvalTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "serve [--stdio | --addr HOST:PORT]",
		Short: "Serve the client protocol over HTTP, or on stdin and stdout",
		Long: `Serve drover's client protocol. Runs are recorded in the ledger like
'drover run' records them.

Without --stdio, drover serves HTTP (docs/http.md): JSON endpoints under /v1,
Server-Sent Events streams of runs' events, and a web dashboard at /
(docs/dashboard.md). It binds 127.0.0.1:8765
unless told otherwise (--addr) and refuses a non-loopback address without a
token. With a token (--token, or better DROVER_TOKEN, which 'ps' does not
show) every request needs "Authorization: Bearer <token>". SIGINT or SIGTERM
ends the streams, cancels the runs and exits 130.

With --stdio (docs/protocol.md): one JSON request a line on stdin, one JSON
response or event a line on stdout. When stdin ends, drover cancels the runs
this connection started (a program that went away leaves no orphans),
answers what is still in flight and exits 0. SIGINT or SIGTERM does the same
and exits 130; a second one kills every agent process group at once.`,
		Example: `  drover serve
  curl -s -XPOST localhost:8765/v1/runs -d '{"agent":"claude","prompt":"explain main.go"}'
  curl -N localhost:8765/v1/runs/run_…/stream

  drover serve --fakemodel    # offline: every run talks to the scripted model server

  DROVER_TOKEN=$(openssl rand -hex 16) drover serve --addr 0.0.0.0:8765

  drover serve --stdio
  {"id":1,"op":"run","agent":"claude","prompt":"explain main.go"}
  {"id":2,"op":"subscribe","runs":["run_…"]}
  {"id":3,"op":"await","runId":"run_…"}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if stdio && (cmd.Flags().Changed("addr") || cmd.Flags().Changed("token")) {
				return usagef("--stdio does not take --addr or --token")
			}
			if !stdio {
				if token == "" {
					token = os.Getenv("DROVER_TOKEN")
				}
				if err := server.CheckAddr(addr, token); err != nil {
					return usagef("%v", err)
				}
			}
			if approvalTimeout < 0 {
				return usagef("--approval-timeout must not be negative")
			}
			fake, err := newOffline(fakeOn, fakeScript, fakeLog)
			if err != nil {
				return err
			}
			rcfg := runs.Config{Limit: limit, DefaultApprovalTimeout: approvalTimeout}
			pcfg := protocol.Config{Logger: e.log}
			if fake != nil {
				apply, stop, err := fake.start(e, true)
				if err != nil {
					return err
				}
				defer stop()
				pcfg.Defaults = apply
			}
			if stdio {
				return serveStdio(ctx, e, db, rcfg, pcfg)
			}
			return serveHTTP(ctx, e, db, rcfg, addr, token, pcfg)
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().BoolVar(&stdio, "stdio", false, "speak the protocol on stdin and stdout instead of HTTP")
	cmd.Flags().StringVar(&addr, "addr", server.DefaultAddr, "HTTP address to listen on")
	cmd.Flags().StringVar(&token, "token", "", "bearer token every HTTP request must carry (default $DROVER_TOKEN)")
	cmd.Flags().IntVar(&limit, "limit", 8, "runs that may run at once; more wait as pending")
	cmd.Flags().DurationVar(&approvalTimeout, "approval-timeout", 0, "how long the permission requests of runs that name no approvalTimeout wait for a client's answer (the dashboard, respond, drover approve); 0: denied at once unless a rule allows")
	cmd.Flags().BoolVar(&fakeOn, "fakemodel", false, "point every run that names no endpoint at drover's built-in scripted model server (offline)")
	cmd.Flags().StringVar(&fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	cmd.Flags().StringVar(&fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	return cmd
}

func serveStdio(ctx context.Context, e *env, db string, rcfg runs.Config, pcfg protocol.Config) error {
	return e.withLedger(ctx, db, rcfg, func(sup *runs.Supervisor, st store.Store) error {
		srv := protocol.NewServer(sup, pcfg)
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
func serveHTTP(ctx context.Context, e *env, db string, rcfg runs.Config, addr, token string, pcfg protocol.Config) error {
	return e.withLedger(ctx, db, rcfg, func(sup *runs.Supervisor, st store.Store) error {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen: %w", err)
		}
		hs := server.New(protocol.NewServer(sup, pcfg), server.Config{Token: token, Logger: e.log})
		h := hs.HTTPServer()
		fmt.Fprintf(e.stderr, "drover: serving HTTP on http://%s\n", ln.Addr())
		if token == "" {
			fmt.Fprintf(e.stderr, "drover: dashboard at http://%s/\n", ln.Addr())
		} else {
			fmt.Fprintf(e.stderr, "drover: dashboard at http://%s/#token=<token> (or sign in with the token there)\n", ln.Addr())
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
