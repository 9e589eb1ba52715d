package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/mcpserver"
	"github.com/drover-run/drover/protocol"
	"github.com/drover-run/drover/runs"
)

func newMCPCmd(e *env) *cobra.Command {
	var db, parent, maxTier, fakeScript, fakeLog string
	var fakeOn bool
	var limit int
	var approvalTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Serve drover's tools to an agent as an MCP server on stdin and stdout",
		Long: `Serve drover as an MCP server (stdio transport, docs/mcp.md): an agent that
has it registered can run other agents through drover with the tools
run_agent, start_run, await_run, get_run, cancel_run and list_agents. Every
run is recorded in the ledger like 'drover run' records it.

Started by an agent that drover runs, drover mcp finds that run in its
environment: every run it starts is a child of it, ends when it ends, is
never above its tier, and shows under it in 'drover show'. It asks the
drover that runs the agent to start them, over that drover's socket
(DROVER_SOCKET, with the run's DROVER_RUN_TOKEN), so that a contained run,
which cannot write the ledger, can still start runs; each child is
contained on its own. Then --limit and --approval-timeout are that
drover's. drover gives its agents neither the ledger's address nor any
credential of its own. With --db or --parent, or without DROVER_SOCKET, it
opens the ledger itself (--db, else DROVER_DB, else the default; its
parent is DROVER_RUN_ID).

Runs are at most in the supervised tier unless --max-tier allows more. When
stdin ends (the agent went away), drover cancels the runs this server
started that are still going and exits 0; SIGINT or SIGTERM does the same and
exits 130.`,
		Example: `  claude mcp add drover -- drover mcp
  codex mcp add drover -- drover mcp
  drover run --mcp-config drover-mcp.json -a claude "have codex review main.go"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			if !cmd.Flags().Changed("parent") {
				parent = os.Getenv(runs.EnvRunID)
			}
			tier, err := drover.ParseTier(maxTier)
			if err != nil {
				return usagef("--max-tier: %v", err)
			}
			if approvalTimeout < 0 {
				return usagef("--approval-timeout must not be negative")
			}
			fake, err := newOffline(fakeOn, fakeScript, fakeLog)
			if err != nil {
				return err
			}
			apply, stopFake, err := fake.start(e, true)
			if err != nil {
				return err
			}
			defer stopFake()
			cfg := mcpserver.Config{ParentID: parent, MaxTier: tier, Defaults: apply, Logger: e.log}
			sock, token := os.Getenv(runs.EnvSocket), os.Getenv(runs.EnvRunToken)
			if sock != "" && token != "" && !cmd.Flags().Changed("db") && !cmd.Flags().Changed("parent") {
				return e.mcpNested(ctx, sock, token, cfg)
			}
			rcfg := runs.Config{Limit: limit, DefaultApprovalTimeout: approvalTimeout}
			return e.withService(ctx, db, true, rcfg, func(svc api.Service) error {
				if parent != "" {
					_, err := runRecord(ctx, svc, parent)
					if api.CodeOf(err) == api.CodeNotFound && !cmd.Flags().Changed("parent") {
						return usagef("%s=%s names no run of this ledger: drover mcp must use the ledger of the drover that runs its agent (%s, or --db)", runs.EnvRunID, parent, runs.EnvDB)
					} else if err != nil {
						return notFound("run", parent, err)
					}
				}
				srv, err := mcpserver.New(svc, cfg)
				if err != nil {
					return err
				}
				return e.serveMCP(ctx, srv)
			})
		},
	}
	addDBFlag(cmd, &db)
	cmd.Flags().StringVar(&parent, "parent", "", "make every run a child of this run (default $DROVER_RUN_ID, which drover sets for the agents it runs)")
	cmd.Flags().StringVar(&maxTier, "max-tier", string(drover.TierSupervised), "the highest tier a client may ask for (sandbox, dry-run, supervised, autonomous); a nested server is also held to its parent run's")
	cmd.Flags().IntVar(&limit, "limit", 8, "runs that may run at once; more wait as pending")
	cmd.Flags().DurationVar(&approvalTimeout, "approval-timeout", 0, "how long the runs' permission requests wait for an answer (drover approve, the dashboard); 0: denied at once unless a rule allows")
	cmd.Flags().BoolVar(&fakeOn, "fakemodel", false, "point every run at drover's built-in scripted model server (offline)")
	cmd.Flags().StringVar(&fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	cmd.Flags().StringVar(&fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	return cmd
}

// mcpNested serves the MCP tools over the drover that runs this process's
// agent, reached at its nested-run socket with the run's token: that
// drover starts, contains and records the runs; every one is a child of
// the run the token names.
func (e *env) mcpNested(ctx context.Context, sock, token string, cfg mcpserver.Config) error {
	client, auth, err := protocol.DialNested(ctx, sock, token)
	if err != nil {
		return fmt.Errorf("%w (drover mcp inside a run asks the drover running it; outside one, unset %s or pass --db)", err, runs.EnvSocket)
	}
	defer client.Close()
	cfg.ParentID = auth.RunID
	if d := cfg.Defaults; d != nil {
		// --fakemodel's config home is under this drover's state
		// directory, which the outer drover refuses as a nested run's
		// (only directories the parent run may write are allowed): the
		// runs keep their vendor's default home instead.
		cfg.Defaults = func(o *drover.Options) {
			cd := o.ConfigDir
			d(o)
			o.ConfigDir = cd
		}
	}
	srv, err := mcpserver.New(client, cfg)
	if err != nil {
		return err
	}
	return e.serveMCP(ctx, srv)
}

// serveMCP serves srv on stdin and stdout until the client ends the
// session (nil) or ctx ends (the interrupted exit).
func (e *env) serveMCP(ctx context.Context, srv *mcpserver.Server) error {
	// stdin is never closed by the server: a Read in progress cannot be
	// interrupted, and on a signal the process exits.
	t := &mcp.IOTransport{Reader: io.NopCloser(e.stdin), Writer: nopWriteCloser{e.stdout}}
	if err := srv.Serve(ctx, t); errors.Is(err, context.Canceled) {
		return exitError{ExitInterrupted}
	} else if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// serveNested makes sup serve the runs started from inside its runs (a
// nested drover mcp) over its nested-run socket, as a protocol server
// confined to each run (protocol.Server.ServeNested). A socket that cannot
// be made is logged, not fatal: the runs then get no DROVER_SOCKET, and a
// nested drover opens the ledger itself, as before.
func serveNested(sup *runs.Supervisor, log *slog.Logger) {
	srv := protocol.NewServer(api.NewLocal(sup, api.Config{Logger: log}),
		protocol.Config{Logger: log, Client: "nested", Authenticate: sup.TokenRun})
	if _, err := sup.ServeNested(srv.ServeNested); err != nil && log != nil {
		log.Warn("no nested-run socket: a drover mcp inside a run will open the ledger itself", "err", err)
	}
}

// readMCPConfig reads drover run's --mcp-config file: {"mcpServers":
// {NAME: SERVER}}, the .mcp.json shape. A field drover does not know is an
// error, not a server silently configured otherwise.
func readMCPConfig(path string) (map[string]drover.MCPServer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, usagef("--mcp-config: %v", err)
	}
	var doc struct {
		MCPServers map[string]drover.MCPServer `json:"mcpServers"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, usagef("--mcp-config %s: %v (want {\"mcpServers\": {NAME: {\"command\", \"args\", \"env\"} or {\"type\", \"url\", \"headers\"}}})", path, err)
	}
	if len(doc.MCPServers) == 0 {
		return nil, usagef("--mcp-config %s names no server under \"mcpServers\"", path)
	}
	return doc.MCPServers, nil
}

// nopWriteCloser is stdout for the MCP transport, which closes its writer
// at the session's end: the command's stdout stays open.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
