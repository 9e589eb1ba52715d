package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/fakemodel"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

type runFlags struct {
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
		RunE: func(cmd *cobra.Command, args []string) error { return runRun(cmd.Context(), e, f, args) },
	}
	fl := cmd.Flags()
	fl.StringArrayVarP(&f.agents, "agent", "a", nil, "agent id or alias (repeat to run several in parallel)")
	fl.BoolVar(&f.json, "json", false, "print the UES events as JSON lines on stdout, nothing else")
	fl.StringVar(&f.tier, "tier", "", "permission tier: sandbox, dry-run, supervised (default), autonomous")
	fl.StringVar(&f.model, "model", "", "model name passed to the agent")
	fl.StringVar(&f.cwd, "cwd", "", "working directory of the agent (default: current)")
	fl.IntVar(&f.maxTurns, "max-turns", 0, "stop after this many agent turns")
	fl.Float64Var(&f.maxBudget, "max-budget-usd", 0, "stop once the run has cost this much")
	fl.StringVar(&f.resume, "resume", "", "vendor resume token of an earlier run (its done.resumeToken)")
	fl.StringSliceVar(&f.allowedTools, "allowed-tools", nil, "restrict the agent to these tools (comma-separated, exact names)")
	fl.StringSliceVar(&f.disallowedTools, "disallowed-tools", nil, "remove these tools (comma-separated, exact names)")
	fl.StringArrayVar(&f.addDirs, "add-dir", nil, "extra directory the agent may access (repeatable)")
	fl.StringVar(&f.systemPrompt, "system-prompt", "", "text appended to the agent's system prompt")
	fl.DurationVar(&f.timeout, "timeout", 0, "end the run with TIMEOUT after this long (e.g. 10m)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "end the run with IDLE_TIMEOUT after this long without output")
	fl.BoolVar(&f.partial, "partial", false, "stream text as it is generated (text_delta events)")
	fl.StringVar(&f.configDir, "config-dir", "", "give the agent its own configuration home in this directory")
	fl.BoolVar(&f.isolate, "isolate", false, "give each run its own new configuration home under drover's state directory (printed; pass it to --config-dir to resume)")
	fl.IntVar(&f.apiRetries, "api-retries", -1, "cap the agent's own retries of failed model API calls")
	fl.StringVar(&f.session, "session", "", "continue this drover session (see 'drover sessions'); the vendor's resume token is passed underneath")
	fl.StringVar(&f.fork, "fork", "", "start a new session continuing from the end of this earlier run (vendors that can fork)")
	addDBFlag(cmd, &f.db)
	fl.BoolVar(&f.fakemodel, "fakemodel", false, "run offline against drover's built-in scripted model server")
	fl.StringVar(&f.fakeScript, "fakemodel-script", "", "script file for --fakemodel (default: the built-in demo script)")
	fl.StringVar(&f.fakeLog, "fakemodel-log", "", "append every request fakemodel receives to this file, one JSON line each")
	return cmd
}

func runRun(ctx context.Context, e *env, f *runFlags, args []string) error {
	if len(f.agents) == 0 {
		return usagef("name an agent with -a (see 'drover agents')")
	}
	prompt, err := readPrompt(e, args)
	if err != nil {
		return err
	}
	opts := drover.Options{
		Model: f.model, Cwd: f.cwd, MaxTurns: f.maxTurns, MaxBudgetUSD: f.maxBudget, Resume: f.resume,
		AllowedTools: f.allowedTools, DisallowedTools: f.disallowedTools, AddDirs: f.addDirs,
		SystemPrompt: f.systemPrompt, Timeout: f.timeout, IdleTimeout: f.idleTimeout,
		PartialText: f.partial, ConfigDir: f.configDir,
	}
	if f.tier != "" {
		t, err := drover.ParseTier(f.tier)
		if err != nil {
			return usageError{err}
		}
		opts.Tier = t
	}
	if f.apiRetries >= 0 {
		n := f.apiRetries
		opts.APIRetries = &n
	}
	if opts.Cwd != "" {
		if st, err := os.Stat(opts.Cwd); err != nil || !st.IsDir() {
			return usagef("--cwd %s is not a directory", opts.Cwd)
		}
	}
	if err := opts.Validate(); err != nil {
		return usageError{err}
	}
	engine := drover.NewEngine(builtin.Registry())
	for _, a := range f.agents {
		if _, ok := engine.Registry().Get(a); !ok {
			return usagef("unknown agent %q (known: %s)", a, strings.Join(engine.Registry().List(), ", "))
		}
	}

	if f.fakemodel || f.fakeScript != "" || f.fakeLog != "" {
		apply, stop, err := startFakemodel(e, f.fakeScript, f.fakeLog, !f.json)
		if err != nil {
			return err
		}
		defer stop()
		apply(&opts)
	}

	if f.isolate && f.configDir != "" {
		return usagef("--isolate and --config-dir exclude each other")
	}
	specs := make([]drover.RunSpec, len(f.agents))
	for i, a := range f.agents {
		specs[i] = drover.RunSpec{Agent: a, Prompt: prompt, Options: opts}
		if len(f.agents) > 1 {
			specs[i].ID = runLabel(f.agents, i)
		}
		// Parallel runs never share a configuration home: vendor CLIs
		// corrupt their state files when two processes write them at once.
		switch {
		case f.isolate:
			dir, err := newIsolatedHome(runLabel(f.agents, i))
			if err != nil {
				return err
			}
			specs[i].Options.ConfigDir = dir
			fmt.Fprintf(e.stderr, "drover: %s: configuration home %s\n", runLabel(f.agents, i), dir)
		case len(f.agents) > 1 && opts.ConfigDir != "":
			specs[i].Options.ConfigDir = filepath.Join(opts.ConfigDir, runLabel(f.agents, i))
		}
	}
	if f.session != "" && f.resume != "" {
		return usagef("--session and --resume exclude each other")
	}
	human := newHuman(e.stdout, len(specs) > 1, f.partial)
	var p printer = human
	if f.json {
		p = &jsonPrinter{w: e.stdout}
	}
	return withLedger(ctx, f.db, max(len(specs), 8), func(sup *runs.Supervisor, st store.Store) error {
		// Runs are cancelled explicitly when ctx ends (a signal), so that
		// following and recording go on until every run has ended.
		bg := context.WithoutCancel(ctx)
		var ids []string
		for _, spec := range specs {
			spec.Options.SessionID = f.session
			started, err := sup.Start(bg, runs.StartRequest{Agent: spec.Agent, Prompt: spec.Prompt, Options: spec.Options,
				ForkFrom: f.fork})
			if err != nil {
				for _, started := range ids {
					_ = sup.Cancel(bg, started)
				}
				if errors.Is(err, store.ErrNotFound) {
					return usagef("%v (see 'drover sessions' and 'drover ps --all')", err)
				}
				if c := drover.CodeOf(err, ""); c == drover.CodeValidation || c == drover.CodeUnsupportedOption {
					return usageError{err}
				}
				return err
			}
			id := started.RunID
			ids = append(ids, id)
			label := spec.ID
			if label == "" {
				label = spec.Agent
			}
			human.labels[id] = label
			fmt.Fprintf(e.stderr, "drover: %s: run %s\n", label, id)
		}
		stop := context.AfterFunc(ctx, func() {
			for _, id := range ids {
				_ = sup.Cancel(bg, id)
			}
		})
		defer stop()

		var printErr error
		for ev, err := range sup.FollowMany(bg, ids...) {
			if err != nil {
				return err
			}
			if printErr == nil {
				if printErr = printStored(p, ev); printErr != nil {
					// Keep draining so every run still ends and is recorded.
					for _, id := range ids {
						_ = sup.Cancel(bg, id)
					}
				}
			}
		}
		if printErr != nil {
			return fmt.Errorf("write output: %w", printErr)
		}
		recs, err := sup.Await(bg, ids...)
		if err != nil {
			return err
		}
		statuses := map[string]drover.DoneStatus{}
		for _, r := range recs {
			statuses[r.ID] = r.DoneStatus
		}
		return exitFor(ctx, statuses)
	})
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

// startFakemodel starts drover's scripted model server in-process (with
// script, or the built-in demo script; logging requests to logPath if set)
// and returns apply, which points a run's options at it. The agent gets a
// configuration home under drover's state directory unless one was given,
// so the user's own is never touched.
func startFakemodel(e *env, script, logPath string, announce bool) (apply func(*drover.Options), stop func(), err error) {
	sc := fakemodel.DefaultScript()
	if script != "" {
		s, err := fakemodel.LoadScript(script)
		if err != nil {
			return nil, nil, usageError{err}
		}
		sc = s
	}
	home, err := stateDir()
	if err != nil {
		return nil, nil, err
	}
	srv := fakemodel.New(sc)
	var logFile *os.File
	if logPath != "" {
		lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, nil, usagef("--fakemodel-log: %v", err)
		}
		logFile = lf
		srv.SetLog(lf)
	}
	stop = func() {
		srv.Close()
		if logFile != nil {
			logFile.Close()
		}
	}
	url, err := srv.Start("127.0.0.1:0")
	if err != nil {
		stop()
		return nil, nil, fmt.Errorf("start fakemodel: %w", err)
	}
	if announce {
		fmt.Fprintf(e.stderr, "drover: offline: agents talk to fakemodel at %s\n", url)
	}
	apply = func(opts *drover.Options) {
		if opts.Endpoint == nil {
			opts.Endpoint = &drover.Endpoint{BaseURL: url, APIKey: "fakemodel"}
		}
		if opts.APIRetries == nil {
			zero := 0
			opts.APIRetries = &zero
		}
		if opts.ConfigDir == "" {
			opts.ConfigDir = filepath.Join(home, "fakemodel-home")
		}
	}
	return apply, stop, nil
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

// stateDir is drover's state directory: $XDG_STATE_HOME/drover or
// ~/.local/state/drover.
func stateDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "drover"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("find drover's state directory: %w (set XDG_STATE_HOME)", err)
	}
	return filepath.Join(home, ".local", "state", "drover"), nil
}

// isTerminal reports whether stream (stdin or stdout) is a terminal.
func isTerminal(stream any) bool {
	f, ok := stream.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

type printer interface{ print(drover.Event) error }

// jsonPrinter writes exactly the UES events, one JSON object per line.
type jsonPrinter struct{ w io.Writer }

func (p *jsonPrinter) print(ev drover.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = p.w.Write(append(data, '\n'))
	return err
}

// human is the readable live view.
type human struct {
	w       io.Writer
	multi   bool
	partial bool
	color   bool
	inDelta map[string]bool   // run printed text deltas not yet closed by its text
	labels  map[string]string // run id → short label for interleaved output
}

func newHuman(w io.Writer, multi, partial bool) *human {
	color := os.Getenv("NO_COLOR") == "" && isTerminal(w)
	return &human{w: w, multi: multi, partial: partial && !multi, color: color, inDelta: map[string]bool{}, labels: map[string]string{}}
}

func (h *human) paint(code, s string) string {
	if !h.color {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (h *human) line(ev drover.Event, s string) error {
	if h.multi {
		label := h.labels[ev.RunID]
		if label == "" {
			label = ev.RunID
		}
		s = h.paint("36", "["+label+"] ") + s
	}
	_, err := fmt.Fprintln(h.w, s)
	return err
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

func (h *human) print(ev drover.Event) error {
	switch p := ev.Payload.(type) {
	case drover.InitPayload:
		return h.line(ev, h.paint("2", fmt.Sprintf("● %s · %s · %s", ev.Agent, p.Model, p.Cwd)))
	case drover.TextDeltaPayload:
		if h.partial {
			h.inDelta[ev.RunID] = true
			_, err := io.WriteString(h.w, p.Delta)
			return err
		}
	case drover.TextPayload:
		if h.inDelta[ev.RunID] {
			delete(h.inDelta, ev.RunID)
			_, err := fmt.Fprintln(h.w)
			return err
		}
		for l := range strings.SplitSeq(strings.TrimRight(p.Content, "\n"), "\n") {
			if err := h.line(ev, l); err != nil {
				return err
			}
		}
	case drover.ThinkingPayload:
		return h.line(ev, h.paint("2", "  ∴ "+firstLine(p.Summary, 100)))
	case drover.ToolUsePayload:
		d := p.Description
		if d == "" {
			d = drover.DescribeTool(p.ToolName, p.Input)
		}
		return h.line(ev, h.paint("33", "  → "+d))
	case drover.ToolResultPayload:
		switch p.Status {
		case drover.ToolSuccess:
			return h.line(ev, h.paint("32", "  ✓ "+p.ToolName)+h.paint("2", " "+firstLine(p.Output, 80)))
		case drover.ToolDenied:
			return h.line(ev, h.paint("35", "  ⊘ "+p.ToolName+" denied: "+firstLine(p.Output, 80)))
		default:
			return h.line(ev, h.paint("31", "  ✗ "+p.ToolName+": "+firstLine(p.Output, 80)))
		}
	case drover.PermissionRequestPayload:
		return h.line(ev, h.paint("35", "  ? "+p.ToolName+" asks for approval"))
	case drover.ErrorPayload:
		c := "31"
		if p.Recoverable {
			c = "33"
		}
		return h.line(ev, h.paint(c, fmt.Sprintf("  ! %s: %s", p.Code, firstLine(p.Message, 200))))
	case drover.DonePayload:
		return h.line(ev, h.doneLine(ev, p))
	}
	return nil
}

func (h *human) doneLine(ev drover.Event, p drover.DonePayload) string {
	parts := []string{string(p.Status), (time.Duration(p.DurationMs) * time.Millisecond).String()}
	u := p.Usage
	if u.InputTokens+u.OutputTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d in / %d out tokens", u.InputTokens, u.OutputTokens))
	}
	if u.ToolUses > 0 {
		parts = append(parts, fmt.Sprintf("%d tool calls", u.ToolUses))
	}
	if u.TotalCostUSD != nil {
		parts = append(parts, fmt.Sprintf("$%.4f", *u.TotalCostUSD))
	}
	if u.Turns != nil {
		parts = append(parts, fmt.Sprintf("%d turns", *u.Turns))
	}
	if p.ResumeToken != "" {
		parts = append(parts, "resume "+p.ResumeToken)
	}
	c := "31" // red: failed
	switch p.Status {
	case drover.StatusSuccess:
		c = "32"
	case drover.StatusInterrupted:
		c = "33"
	}
	return h.paint(c, "■ "+strings.Join(parts, " · "))
}
