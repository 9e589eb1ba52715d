package cli

import (
	"context"
	"errors"
	"runtime/debug"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/acpagent"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/runs"
	"github.com/spf13/cobra"
)

func newACPCmd(e *env) *cobra.Command {
	var agent, tier, db, fakeScript, fakeLog string
	var models []string
	var fakeOn bool
	var limit int
	var approvalTimeout time.Duration
	cmd := &cobra.Command{
		Use:   "acp [-a AGENT] [--tier TIER] [--model MODEL…]",
		Short: "Be an Agent Client Protocol agent on stdin and stdout, for editors such as Zed",
		Long: `Speak the Agent Client Protocol (ACP) on stdin and stdout as an agent, so
that an editor (Zed, or any ACP client) reaches every agent drover runs
through drover, with its tiers, sessions and ledger (docs/acp.md).

Each editor session is a drover session: each prompt is a run, recorded in
the ledger like 'drover run' records it, that continues the session's
conversation. The run's permission requests are asked in the editor. The
editor picks the agent, model and tier of a session; -a, --model and --tier
are the defaults (repeat --model to offer several; the first is the
default). Loading a session replays it from the ledger, so the editor can
reopen any drover session ('drover sessions').

When stdin ends, drover cancels the runs this connection started, waits
until they are recorded and exits 0. SIGINT or SIGTERM does the same and
exits 130; a second one kills every agent process group at once.`,
		Example: `  drover acp -a claude
  drover acp -a codex --tier dry-run --model gpt-5-codex
  drover acp --fakemodel        # offline: every run talks to the scripted model server

  Zed's settings.json:
  "agent_servers": {"drover": {"type": "custom", "command": "drover", "args": ["acp", "-a", "claude"]}}`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			ad, ok := builtin.Registry().Get(agent)
			if !ok {
				return usagef("unknown agent %q (see 'drover agents')", agent)
			}
			agent = ad.ID()
			t, err := drover.ParseTier(tier)
			if err != nil {
				return usagef("--tier: %v", err)
			}
			if approvalTimeout <= 0 {
				return usagef("--approval-timeout must be positive: the editor needs time to answer")
			}
			fake, err := newOffline(fakeOn, fakeScript, fakeLog)
			if err != nil {
				return err
			}
			cfg := acpagent.Config{Agent: agent, Models: models, Tier: t, ApprovalTimeout: approvalTimeout,
				Version: version(), Logger: e.log}
			if fake != nil {
				apply, stop, err := fake.start(e, true)
				if err != nil {
					return err
				}
				defer stop()
				cfg.Defaults = apply
			}
			return e.withService(ctx, db, true, runs.Config{Limit: limit}, func(svc api.Service) error {
				err := acpagent.Serve(ctx, svc, cfg, e.stdin, e.stdout)
				if errors.Is(err, context.Canceled) {
					return exitError{ExitInterrupted}
				}
				return err
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&agent, "agent", "a", "claude", "agent of new sessions, id or alias (see 'drover agents'); the editor can pick another")
	fl.StringVar(&tier, "tier", string(drover.DefaultTier), "permission tier of new sessions: sandbox, dry-run, supervised or autonomous")
	fl.StringArrayVar(&models, "model", nil, "model offered to the editor (repeatable; the first is new sessions' model; default: the agent's own)")
	fl.DurationVar(&approvalTimeout, "approval-timeout", 10*time.Minute, "how long a permission request waits for the editor's answer before it is denied")
	fl.IntVar(&limit, "limit", 8, "runs that may run at once; more wait as pending")
	addDBFlag(cmd, &db)
	fl.BoolVar(&fakeOn, "fakemodel", false, "point every run that names no endpoint at drover's built-in scripted model server (offline)")
	fl.StringVar(&fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	fl.StringVar(&fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	return cmd
}

// version is drover's module version as built, or "dev".
func version() string {
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}
