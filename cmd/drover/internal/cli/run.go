package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/engine"
	"github.com/drover-run/drover/internal/config"
	"github.com/drover-run/drover/internal/imagemem"
	"github.com/drover-run/drover/pricing"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

type runFlags struct {
	notify          []string
	worktree        bool
	base            string
	includeDirty    bool
	check           string
	agents          []string
	json            bool
	tier            string
	model           string
	cwd             string
	maxTurns        int
	maxBudget       float64
	resume          string
	allowedTools    []string
	disallowedTools []string
	addDirs         []string
	systemPrompt    string
	timeout         time.Duration
	idleTimeout     time.Duration
	partial         bool
	configDir       string
	apiRetries      int
	fakemodel       bool
	fakeScript      string
	fakeLog         string
	isolate         bool
	db              string
	session         string
	fork            string
	approvalTimeout time.Duration
	allow, deny     []string
	ask             bool
	askSet          bool // --ask was given (else: ask when stdin is a terminal)
	mcpConfig       string
	envs            []string // --env KEY=VALUE, or KEY to pass drover's own value
	contain         bool
	noContain       bool
	net             string // --net: api-only, or ports
	containReads    bool
	profiles        []string // failover (docs/failover.md)
	modelFallback   []string
	fallback        []string
	prices          string   // a JSON price file (docs/limits.md)
	queue           bool     // queue for drover workers (docs/scale-out.md)
	labels          []string // the workers' labels a queued run needs
	retries         int      // re-runs of a queued run whose worker is lost
}

func newRunCmd(e *env) *cobra.Command {
	f := &runFlags{}
	cmd := &cobra.Command{
		Use:   "run -a AGENT [-a AGENT…] [flags] PROMPT",
		Short: "Run an agent on a prompt and stream its events",
		Long: `Run one agent, or several in parallel (repeat -a), on PROMPT and print the
events as they happen. PROMPT "-", or no PROMPT with stdin piped, reads stdin.

Exit status: 0 when every run succeeded, 1 when any ended otherwise, 2 on a
usage error, 130 after SIGINT once every run has ended interrupted.`,
		Example: `  drover run -a claude "explain main.go"
  drover run -a claude --tier dry-run --json "review this repo" > events.jsonl
  drover run --fakemodel -a claude "write hello.txt, then run ls"   # offline`,
		RunE: func(cmd *cobra.Command, args []string) error {
			f.askSet = cmd.Flags().Changed("ask")
			if !cmd.Flags().Changed("approval-timeout") {
				f.approvalTimeout = -1 // the default depends on whether drover asks here
			} else if f.approvalTimeout < 0 {
				return usagef("--approval-timeout must not be negative")
			}
			// Said in the flags' own names, before the options' checks say
			// it in the API's (maxTurns): 0 would silently mean "no limit".
			fl := cmd.Flags()
			switch {
			case fl.Changed("max-turns") && f.maxTurns < 1:
				return usagef("--max-turns must be at least 1, got %d", f.maxTurns)
			case fl.Changed("max-budget-usd") && !(f.maxBudget > 0):
				return usagef("--max-budget-usd must be more than 0, got %g", f.maxBudget)
			case fl.Changed("timeout") && f.timeout <= 0:
				return usagef("--timeout must be more than 0, got %s", f.timeout)
			case fl.Changed("idle-timeout") && f.idleTimeout <= 0:
				return usagef("--idle-timeout must be more than 0, got %s", f.idleTimeout)
			}
			return runRun(cmd.Context(), e, f, args)
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.agents, "agent", "a", nil, "agent id or alias (repeat to run several in parallel)")
	fl.BoolVar(&f.worktree, "worktree", false, "run in a git workspace of the run's own, on branch drover/RUN, from HEAD or --base; its change is recorded for review (drover diff, apply, merge, discard, revise; docs/workspaces.md)")
	fl.StringVar(&f.base, "base", "", "with --worktree: the commit, branch or tag the workspace starts from (default HEAD)")
	fl.BoolVar(&f.includeDirty, "include-dirty", false, "with --worktree: carry the working tree's uncommitted changes into the workspace")
	fl.StringVar(&f.check, "check", "", "with --worktree: a shell command run in the workspace after the run (e.g. 'go test ./...'); its result is recorded and compared")
	fl.BoolVar(&f.json, "json", false, "print the UES events as JSON lines on stdout, nothing else")
	fl.StringVar(&f.tier, "tier", "", "permission tier: sandbox, dry-run, supervised (default), autonomous")
	fl.StringVar(&f.model, "model", "", "model name passed to the agent")
	fl.StringVar(&f.cwd, "cwd", "", "working directory of the agent (default: current)")
	fl.IntVar(&f.maxTurns, "max-turns", 0, "stop after this many model responses (turns)")
	fl.Float64Var(&f.maxBudget, "max-budget-usd", 0, "stop once the run has cost this many US dollars")
	fl.StringVar(&f.prices, "prices", "", "JSON file of model prices in USD per million tokens, over $DROVER_PRICES and the built-in table")
	fl.StringVar(&f.resume, "resume", "", "vendor resume token of an earlier run (its done.resumeToken)")
	fl.StringSliceVar(&f.allowedTools, "allowed-tools", nil, "restrict the agent to these tools (comma-separated, exact names)")
	fl.StringSliceVar(&f.disallowedTools, "disallowed-tools", nil, "remove these tools (comma-separated, exact names)")
	fl.StringArrayVar(&f.addDirs, "add-dir", nil, "extra directory the agent may access (repeatable)")
	fl.StringVar(&f.systemPrompt, "system-prompt", "", "text appended to the agent's system prompt")
	fl.DurationVar(&f.timeout, "timeout", 0, "end the run with TIMEOUT after this long (e.g. 10m)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "end the run with IDLE_TIMEOUT after this long without output")
	addNotifyFlag(cmd, &f.notify)
	fl.BoolVar(&f.partial, "partial", false, "stream text as it is generated (text_delta events)")
	fl.StringVar(&f.configDir, "config-dir", "", "give the agent its own configuration home in this directory")
	fl.BoolVar(&f.isolate, "isolate", false, "give each run its own new configuration home under drover's state directory (printed; pass it to --config-dir to resume)")
	fl.IntVar(&f.apiRetries, "api-retries", -1, "cap the agent's own retries of failed model API calls")
	fl.StringVar(&f.session, "session", "", "continue this drover session (see 'drover sessions'); the vendor's resume token is passed underneath")
	fl.StringVar(&f.fork, "fork", "", "start a new session continuing from the end of this earlier run (vendors that can fork)")
	fl.BoolVar(&f.ask, "ask", false, "ask here for approval of tool calls that need it: y, n [MESSAGE] or a(lways) on stdin (default when stdin is a terminal and --json is not given)")
	fl.DurationVar(&f.approvalTimeout, "approval-timeout", 0, "how long a permission request waits for an answer (here, the dashboard, 'drover approve') before it is denied (default 5m when asking here, else 0: denied at once unless a rule allows it)")
	fl.StringArrayVar(&f.envs, "env", nil, "KEY=VALUE added to the agent's environment, or KEY to pass on drover's own value: the agent inherits no credential but its vendor's (docs/security.md) (repeatable)")
	fl.StringArrayVar(&f.allow, "allow", nil, "allow matching tool calls without asking: TOOL or TOOL(PATTERN), e.g. Read, 'Bash(git status*)' (repeatable)")
	fl.StringArrayVar(&f.deny, "deny", nil, "deny matching tool calls without asking, e.g. 'Bash(rm *)' (repeatable; deny wins over allow)")
	fl.StringVar(&f.mcpConfig, "mcp-config", "", `MCP servers the agent may use: a JSON file in the .mcp.json shape, {"mcpServers": {NAME: {"command", "args", "env"} or {"type": "http"|"sse", "url", "headers"}}} (docs/mcp.md)`)
	fl.BoolVar(&f.contain, "contain", false, "confine the agent and everything it starts to the workspace, --add-dir, its own state and a temporary directory with the kernel (Landlock), in any tier; refused where that cannot be (default: below autonomous, where it can)")
	fl.BoolVar(&f.noContain, "no-contain", false, "do not confine the agent with the kernel (its tier still applies)")
	fl.StringVar(&f.net, "net", "", `restrict the TCP connections the contained agent may make: "api-only" (the model API's port and the run's HTTP MCP servers') or ports "443,8080"; implies containment (docs/security.md)`)
	fl.BoolVar(&f.containReads, "contain-reads", false, "let the contained agent read only its workspace, --add-dir, its own state, the system's directories, its PATH and its installation: not drover's state nor the rest of the home; implies containment (docs/security.md)")
	fl.StringSliceVar(&f.profiles, "profile", nil, "credential profiles to run with, tried in turn when one is rate limited, overloaded or refused before any tool ran (comma-separated; see 'drover profiles')")
	fl.StringSliceVar(&f.modelFallback, "model-fallback", nil, "models to try, in turn, once every profile failed with --model (comma-separated)")
	fl.StringSliceVar(&f.fallback, "fallback", nil, "agents to try, in turn, once every profile and model failed (comma-separated, e.g. codex,gemini)")
	addDBFlag(cmd, &f.db)
	fl.BoolVar(&f.queue, "queue", false, "queue the run for drover workers instead of running it here (a PostgreSQL ledger; docs/scale-out.md)")
	fl.StringSliceVar(&f.labels, "labels", nil, "with --queue: only workers carrying all these labels may run it")
	fl.IntVar(&f.retries, "retries", 0, "with --queue: run it again, as a new run on another worker, up to this many times if its worker is lost (idempotent tasks only)")
	fl.BoolVar(&f.fakemodel, "fakemodel", false, "run offline against drover's built-in scripted model server")
	fl.StringVar(&f.fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	fl.StringVar(&f.fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	return cmd
}

func runRun(ctx context.Context, e *env, f *runFlags, args []string) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		// A run's live heap is a few MB (the followers' tail, the ledger
		// writer's queue); the runtime's default lets the heap grow to
		// twice that between collections. 70 % keeps a 100k-event run
		// under its 25 MB (PERF-2) for ~5 % more CPU in the collector
		// (docs/performance.md). GOGC set by the user wins.
		debug.SetGCPercent(runGCPercent)
	}
	remote, err := e.remote(f.db)
	if err != nil {
		return err
	}
	if remote != nil {
		switch {
		case f.isolate:
			return usagef("--isolate makes configuration homes on this machine: with --server, give --config-dir (a directory on the server's machine)")
		case f.fakemodel || f.fakeScript != "" || f.fakeLog != "":
			return usagef("--fakemodel starts a model server on this machine: with --server, the server decides (drover serve --fakemodel)")
		case f.queue:
			return usagef("--queue: with --server, the server decides whether its runs are queued (drover serve --queue)")
		}
		if err := remote.Connect(ctx); err != nil {
			return serviceError(err)
		}
	}
	plan, err := planRun(ctx, e, f, args, remote)
	if err != nil {
		return err
	}
	opts := plan.opts
	if plan.fake != nil {
		apply, stop, err := plan.fake.start(e, !f.json)
		if err != nil {
			return err
		}
		defer stop()
		apply(&opts)
	}
	specs, err := runSpecs(e, f, plan.prompt, opts)
	if err != nil {
		return err
	}
	if plan.ask && f.approvalTimeout < 0 {
		// Asked here: the runs of agents that ask wait for an answer.
		for i := range specs {
			if plan.asks[specs[i].Agent] {
				specs[i].Options.ApprovalTimeout = defaultAskTimeout
			}
		}
	}
	out := newConsole(e.stdout) // the printer's and the asker's
	human := newHuman(out, len(specs) > 1, f.partial)
	var p printer = human
	if f.json {
		p = &jsonPrinter{w: out}
	}
	rcfg := runs.Config{Limit: max(len(specs), 8)}
	n, err := e.notifier(f.notify)
	if err != nil {
		return err
	}
	defer closeNotifier(n)
	if n != nil {
		rcfg.Notifier = n
	}
	if f.queue {
		rcfg.Queue = queueWanted{}
	}
	return e.withService(ctx, f.db, true, rcfg, func(svc api.Service) error {
		// Runs are cancelled explicitly when ctx ends (a signal), so that
		// following and recording go on until every run has ended.
		bg := context.WithoutCancel(ctx)
		cancelAll := func(ids []string) {
			for _, id := range ids {
				_, _ = svc.Cancel(bg, api.RunIDParams{RunID: id})
			}
		}
		var ids []string
		for _, spec := range specs {
			o := spec.Options
			started, err := svc.Run(bg, api.RunParams{Agent: spec.Agent, Prompt: spec.Prompt, Options: &o,
				Fork: f.fork, Labels: f.labels, Retries: f.retries})
			if err != nil {
				cancelAll(ids)
				// planRun checked all this; the ledger may have changed since.
				return serviceError(err)
			}
			id := started.RunID
			ids = append(ids, id)
			label := spec.ID
			if label == "" {
				label = spec.Agent
			}
			human.labels[id] = label
			fmt.Fprintf(e.stderr, "drover: %s: run %s\n", label, id)
			if started.Workspace != "" {
				fmt.Fprintf(e.stderr, "drover: %s: works in %s on branch %s\n", label, started.Workspace, started.Branch)
			}
			if n := len(started.Uncommitted); n > 0 {
				fmt.Fprintf(e.stderr, "drover: %s: %d uncommitted %s of your working tree %s not in its workspace (--include-dirty carries them): %s\n",
					label, n, plural(n, "change", "changes"), plural(n, "is", "are"), strings.Join(started.Uncommitted[:min(n, 5)], ", "))
			}
		}
		stop := context.AfterFunc(ctx, func() { cancelAll(ids) })
		defer stop()

		var ask *asker
		if plan.ask {
			human.asking = true
			ask = newAsker(svc, e.stdin, out, human.labels, len(specs) > 1)
			defer ask.stop()
		}
		// With --json and nobody asked anything, the events of a batch
		// (those that became durable together) go out in one write: a
		// write per event was a syscall per event. The asker shares out,
		// so with it each event is written as it comes.
		flush := func() error { return nil }
		if jp, ok := p.(*jsonPrinter); ok && ask == nil {
			bw := bufio.NewWriterSize(out, 64<<10)
			jp.w, flush = bw, bw.Flush
		}
		var printErr error
		cancelled, settled := false, false
		for evs, err := range svc.Follow(bg, api.FollowParams{Runs: ids}) {
			if err != nil {
				return e.recordError(ctx, f.db, err)
			}
			for _, ev := range evs {
				if ask != nil {
					ask.seen(ev)
				}
				if printErr == nil {
					printErr = printStored(p, ev)
				}
			}
			if printErr == nil {
				printErr = flush()
			}
			if !settled {
				// The first events are out: the ledger is open, the
				// vendors started and the path every later event takes
				// has run. The image pages only the setup used (flags,
				// configuration, schema, process start) go back; the
				// event path maps its own again within a few events.
				settled = true
				_, _ = imagemem.Release()
			}
			if printErr != nil && !cancelled {
				// Keep draining so every run still ends and is recorded.
				cancelled = true
				cancelAll(ids)
			}
		}
		if printErr != nil {
			return fmt.Errorf("write output: %w", printErr)
		}
		recs, err := svc.Await(bg, api.AwaitParams{Runs: ids})
		if err != nil {
			return e.recordError(ctx, f.db, err)
		}
		statuses := map[string]drover.DoneStatus{}
		for _, r := range recs.Runs {
			statuses[r.ID] = r.DoneStatus
		}
		sayChanges(bg, e, svc, ids, human.labels)
		return exitFor(ctx, statuses)
	})
}

// plural is one or many by n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// recordError says an error of following or awaiting drover run's runs:
// one the ledger db could not record (LED-7) in one line naming the
// ledger, with exit status 130 once a signal has cancelled ctx, else 1;
// anything else as serviceError says it.
func (e *env) recordError(ctx context.Context, db string, err error) error {
	var ue *runs.UnrecordedError
	if !errors.As(err, &ue) {
		return serviceError(err)
	}
	fmt.Fprintf(e.stderr, "drover: run %s: could not write the ledger %s: %v\n", ue.RunID, ledgerName(db), ue.Err)
	if ctx.Err() != nil {
		return exitError{ExitInterrupted}
	}
	return exitError{ExitFailure}
}

// runGCPercent is `drover run`'s garbage collection target (GOGC) when the
// environment sets none.
const runGCPercent = 70

// runPlan is a `drover run` that passed every usage check. Nothing has
// been created on disk or started for it yet.
type runPlan struct {
	prompt string
	opts   drover.Options  // before fakemodel's defaults and the runs' own homes
	fake   *offline        // nil without --fakemodel
	ask    bool            // ask the person at the terminal for approvals
	asks   map[string]bool // the agents (as named with -a) whose runs ask for approval
}

// planRun checks everything in how drover run was called that can be
// wrong, so that a refused invocation leaves no trace: no configuration
// home, no ledger, no fakemodel server. It refuses what the service would
// refuse of each run: asking the server (remote, Check), or checking as
// the supervisor does (runs.Check) with the ledger, if there is one, read
// for --session and --fork.
func planRun(ctx context.Context, e *env, f *runFlags, args []string, remote *server.Client) (*runPlan, error) {
	switch {
	case len(f.agents) == 0:
		return nil, usagef("name an agent with -a (see 'drover agents')")
	case f.isolate && f.configDir != "":
		return nil, usagef("--isolate and --config-dir exclude each other")
	case f.session != "" && f.resume != "":
		return nil, usagef("--session and --resume exclude each other")
	case f.session != "" && f.fork != "":
		return nil, usagef("--session and --fork exclude each other (a fork starts a new session)")
	case f.contain && f.noContain:
		return nil, usagef("--contain and --no-contain exclude each other")
	}
	prompt, err := readPrompt(e, args)
	if err != nil {
		return nil, err
	}
	opts := drover.Options{
		Model: f.model, Cwd: f.cwd, MaxTurns: f.maxTurns, MaxBudgetUSD: f.maxBudget, Resume: f.resume,
		AllowedTools: f.allowedTools, DisallowedTools: f.disallowedTools, AddDirs: f.addDirs,
		SystemPrompt: f.systemPrompt, Timeout: f.timeout, IdleTimeout: f.idleTimeout,
		PartialText: f.partial, ConfigDir: f.configDir, SessionID: f.session,
	}
	if f.tier != "" {
		t, err := drover.ParseTier(f.tier)
		if err != nil {
			return nil, usageError{err}
		}
		opts.Tier = t
	}
	if f.prices != "" {
		if opts.Prices, err = pricing.Load(f.prices); err != nil {
			return nil, usagef("--prices: %v", err)
		}
	}
	if f.apiRetries >= 0 {
		n := f.apiRetries
		opts.APIRetries = &n
	}
	if f.contain || f.noContain {
		on := f.contain
		opts.Contain = &on
	}
	opts.Network, opts.ContainReads = f.net, f.containReads
	if f.worktree {
		opts.Worktree = &drover.Worktree{Base: f.base, IncludeDirty: f.includeDirty, Check: f.check}
	} else if f.base != "" || f.includeDirty || f.check != "" {
		return nil, usagef("--base, --include-dirty and --check go with --worktree")
	}
	if opts.Cwd != "" && remote == nil {
		if st, err := os.Stat(opts.Cwd); err != nil || !st.IsDir() {
			return nil, usagef("--cwd %s is not a directory", opts.Cwd)
		}
	}
	asking, err := f.asking(e)
	if err != nil {
		return nil, err
	}
	for _, r := range f.allow {
		rule, err := drover.ParsePermissionRule("allow:" + r)
		if err != nil {
			return nil, usagef("--allow %s: %v", r, err)
		}
		opts.PermissionRules = append(opts.PermissionRules, rule)
	}
	for _, r := range f.deny {
		rule, err := drover.ParsePermissionRule("deny:" + r)
		if err != nil {
			return nil, usagef("--deny %s: %v", r, err)
		}
		opts.PermissionRules = append(opts.PermissionRules, rule)
	}
	if f.approvalTimeout >= 0 {
		opts.ApprovalTimeout = f.approvalTimeout
	}
	for _, kv := range f.envs {
		k, v, set := strings.Cut(kv, "=")
		if !set {
			if v, set = os.LookupEnv(k); !set {
				return nil, usagef("--env %s: drover's environment has no %s to pass on (give KEY=VALUE)", k, k)
			}
		}
		if k == "" {
			return nil, usagef("--env %q: want KEY=VALUE or KEY", kv)
		}
		if opts.Env == nil {
			opts.Env = map[string]string{}
		}
		opts.Env[k] = v
	}
	if f.mcpConfig != "" {
		if opts.MCPServers, err = readMCPConfig(f.mcpConfig); err != nil {
			return nil, err
		}
	}
	if opts.Failover, err = failoverOf(f, remote != nil); err != nil {
		return nil, err
	}
	if err := opts.Validate(); err != nil {
		return nil, usageError{err}
	}
	fake, err := newOffline(f.fakemodel, f.fakeScript, f.fakeLog)
	if err != nil {
		return nil, err
	}
	plan := &runPlan{prompt: prompt, opts: opts, fake: fake, ask: asking, asks: map[string]bool{}}
	if remote != nil {
		return plan, checkRemote(ctx, remote, f, plan)
	}
	fork, sess, err := findInLedger(ctx, e, f.db, f.session, f.fork)
	if err != nil {
		return nil, err
	}
	eng := engine.New(builtin.Registry())
	for _, a := range f.agents {
		// What the supervisor will refuse of each run, once drover has
		// filled in what the flags imply. Only which options are set
		// matters here, not their values: the fakemodel's address and the
		// isolated homes do not exist yet.
		o := opts
		if fake != nil {
			fake.defaults("")(&o)
		}
		if f.isolate {
			o.ConfigDir = "isolated"
		}
		ad, ok := eng.Registry().Get(a)
		plan.asks[a] = ok && ad.Capabilities().Permissions
		if plan.asks[a] && asking && f.approvalTimeout < 0 {
			o.ApprovalTimeout = defaultAskTimeout // asked here: the check sees the timeout the run will have
		}
		// Planned live, as the supervisor plans every run it executes.
		_, err := runs.Check(eng, runs.StartRequest{Agent: a, Prompt: prompt, Options: o, ForkFrom: f.fork}, fork, sess, engine.Defaults{Live: true, Workspaces: true})
		if err != nil {
			return nil, preflightError(f, a, err)
		}
	}
	if f.worktree {
		if err := checkWorktree(ctx, f, opts); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// checkWorktree refuses, as the supervisor would when it plans the
// run's workspace, a --worktree run for which none can be made: a queued
// run, no git, no repository or no commit where the run would work, a
// --base that names no commit, --include-dirty from a base other than
// HEAD. Refused here, the run leaves no trace (planRun).
func checkWorktree(ctx context.Context, f *runFlags, opts drover.Options) error {
	if f.queue {
		return usagef("--worktree: a queued run has no workspace (drover workers run in place)")
	}
	cwd, _ := opts.WorkDirs()
	if _, _, err := runs.ResolveWorktree(ctx, cwd, *opts.Worktree); err != nil {
		return usagef("--worktree: %v", err)
	}
	return nil
}

// failoverOf is the failover chain of --profile, --model-fallback and
// --fallback, nil when none is given; the profiles are read from drover's
// profiles file, with their secrets. A queued run's profiles, and a run's
// on a server, are names alone: the workers, or the server, run them with
// their own profiles of those names.
func failoverOf(f *runFlags, remote bool) (*drover.Failover, error) {
	if len(f.profiles) == 0 && len(f.modelFallback) == 0 && len(f.fallback) == 0 {
		return nil, nil
	}
	fo := &drover.Failover{Models: f.modelFallback, Agents: f.fallback}
	if f.queue || remote {
		for _, n := range f.profiles {
			fo.Profiles = append(fo.Profiles, drover.Profile{Name: n})
		}
		return fo, nil
	}
	if len(f.profiles) > 0 {
		path, err := config.ProfilesFile()
		if err != nil {
			return nil, err
		}
		if fo.Profiles, err = config.ResolveProfiles(path, f.profiles); err != nil {
			return nil, usageError{err}
		}
	}
	return fo, nil
}

// joinTiers names tiers for a message: "a", "a or b".
func joinTiers(ts []drover.Tier) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = string(t)
	}
	return strings.Join(s, " or ")
}

// defaultAskTimeout is how long a request waits when drover asks a person
// at the terminal and --approval-timeout is not given.
const defaultAskTimeout = 5 * time.Minute

// asking decides whether drover run asks the person at the terminal to
// answer permission requests: --ask, else when stdin is a terminal and the
// output is the human view.
func (f *runFlags) asking(e *env) (bool, error) {
	if !f.askSet {
		return isTerminal(e.stdin) && !f.json, nil
	}
	if f.ask && f.json {
		return false, usagef("--ask asks on stdout, which --json keeps for events only")
	}
	return f.ask, nil
}

// findInLedger looks up the run to fork from and the session to continue,
// where named, without creating the ledger: a ledger that does not exist
// has neither.
func findInLedger(ctx context.Context, e *env, db, session, fork string) (*store.Run, *store.Session, error) {
	if session == "" && fork == "" {
		return nil, nil, nil
	}
	kind, id := "session", session
	if fork != "" {
		kind, id = "run", fork
	}
	st, err := e.openExistingLedger(ctx, db)
	if errors.Is(err, errNoLedger) {
		return nil, nil, notFound(kind, id, store.ErrNotFound)
	}
	if err != nil {
		return nil, nil, err
	}
	defer st.Close()
	if session != "" {
		sess, err := st.GetSession(ctx, session)
		return nil, sess, notFound(kind, id, err)
	}
	r, err := st.GetRun(ctx, fork)
	return r, nil, notFound(kind, id, err)
}

// runSpecs returns one run of each -a with opts. Parallel runs never share
// a configuration home: vendor CLIs corrupt their state files when two
// processes write them at once. So with --isolate each run gets a new home
// (created here and printed), and runs under one home get a subdirectory
// each.
func runSpecs(e *env, f *runFlags, prompt string, opts drover.Options) ([]engine.RunSpec, error) {
	specs := make([]engine.RunSpec, len(f.agents))
	for i, a := range f.agents {
		label := runLabel(f.agents, i)
		specs[i] = engine.RunSpec{Agent: a, Prompt: prompt, Options: opts}
		if len(f.agents) > 1 {
			specs[i].ID = label
		}
		switch {
		case f.isolate:
			dir, err := newIsolatedHome(label)
			if err != nil {
				return nil, err
			}
			specs[i].Options.ConfigDir = dir
			fmt.Fprintf(e.stderr, "drover: %s: configuration home %s\n", label, dir)
		case len(f.agents) > 1 && opts.ConfigDir != "":
			specs[i].Options.ConfigDir = filepath.Join(opts.ConfigDir, label)
		}
	}
	return specs, nil
}

// exitFor maps how the runs ended to drover's exit status.
func exitFor(ctx context.Context, statuses map[string]drover.DoneStatus) error {
	all := func(s drover.DoneStatus) bool {
		for _, st := range statuses {
			if st != s {
				return false
			}
		}
		return len(statuses) > 0
	}
	switch {
	case all(drover.StatusSuccess):
		return nil
	case ctx.Err() != nil && all(drover.StatusInterrupted):
		return exitError{ExitInterrupted}
	}
	return exitError{ExitFailure}
}

// runLabel names run i for interleaved output: the agent name, numbered when
// the same agent runs more than once.
func runLabel(agents []string, i int) string {
	n := 0
	for _, a := range agents {
		if a == agents[i] {
			n++
		}
	}
	if n == 1 {
		return agents[i]
	}
	k := 1
	for _, a := range agents[:i] {
		if a == agents[i] {
			k++
		}
	}
	return fmt.Sprintf("%s#%d", agents[i], k)
}

func readPrompt(e *env, args []string) (string, error) {
	prompt := strings.Join(args, " ")
	if prompt == "-" || (prompt == "" && !isTerminal(e.stdin)) {
		data, err := io.ReadAll(e.stdin)
		if err != nil {
			return "", fmt.Errorf("read prompt from stdin: %w", err)
		}
		prompt = string(data)
	}
	if strings.TrimSpace(prompt) == "" {
		return "", usagef("no prompt: give it as an argument, or pipe it on stdin")
	}
	return prompt, nil
}

// newIsolatedHome creates a fresh configuration home for one run under
// drover's state directory.
func newIsolatedHome(label string) (string, error) {
	dir, err := stateDir()
	if err != nil {
		return "", err
	}
	base := filepath.Join(dir, "homes")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("create isolated home: %w", err)
	}
	home, err := os.MkdirTemp(base, strings.ReplaceAll(label, "#", "-")+"-")
	if err != nil {
		return "", fmt.Errorf("create isolated home: %w", err)
	}
	return home, nil
}

// checkRemote refuses, before any run starts, what the server would refuse
// of each run (Check), and learns which agents ask for approval.
func checkRemote(ctx context.Context, c *server.Client, f *runFlags, plan *runPlan) error {
	for _, a := range f.agents {
		o := plan.opts
		res, err := c.Check(ctx, api.RunParams{Agent: a, Prompt: plan.prompt, Options: &o, Fork: f.fork})
		if err != nil {
			return preflightError(f, a, err)
		}
		plan.asks[a] = res.Asks
	}
	return nil
}

// preflightError says why the run of agent a would be refused, as a usage
// error, in the same words whether the check was the server's or this
// process's.
func preflightError(f *runFlags, a string, err error) error {
	e := api.ErrorOf(err)
	switch {
	case e.Code == api.CodeNotFound && f.session != "":
		return notFound("session", f.session, err)
	case e.Code == api.CodeNotFound && f.fork != "":
		return notFound("run", f.fork, err)
	case e.Code != api.CodeValidation && e.Code != api.CodeBoundaryViolation && e.Code != api.CodeNotFound:
		return serviceError(err)
	case strings.HasPrefix(e.Message, drover.ErrUnknownAgent.Error()):
		return usageError{errors.New(e.Message)}
	case strings.HasPrefix(e.Message, string(drover.CodeUnsupportedOption)):
		return usagef("%s: %s (see 'drover agents --json' for what it supports)", a, e.Message)
	}
	return usagef("%s: %s", a, e.Message)
}
