package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/drover-run/drover/server"
)

// Prometheus metrics of drover serve and drover worker (OBS-2,
// docs/telemetry.md).

func addMetricsFlag(cmd *cobra.Command, addr *string) {
	cmd.Flags().StringVar(addr, "metrics-addr", "", "also serve Prometheus metrics at /metrics on this loopback address, without a token (docs/telemetry.md)")
}

// checkMetricsAddr refuses a --metrics-addr that is not a loopback
// HOST:PORT: its listener has no token.
func checkMetricsAddr(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usagef("--metrics-addr %q: want a loopback HOST:PORT such as 127.0.0.1:9464 (%v)", addr, err)
	}
	if !server.IsLoopback(host) {
		return usagef("--metrics-addr %s: not a loopback address; the metrics listener has no token, so it binds 127.0.0.1, [::1] or localhost only (on another address, scrape drover serve's /metrics with its token)", addr)
	}
	return nil
}

// serveMetrics serves h at GET /metrics (and nothing else) on addr, and
// says where on stderr. The returned stop shuts the listener down and
// waits for its goroutine; it must be called.
func serveMetrics(e *env, addr string, h http.Handler) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	fmt.Fprintf(e.stderr, "drover: metrics at http://%s/metrics\n", ln.Addr())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			e.log.Error("metrics listener", "err", err)
		}
	})
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			hs.Close()
		}
		wg.Wait()
	}, nil
}
