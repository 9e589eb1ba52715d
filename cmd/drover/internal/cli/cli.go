// Package cli is the drover command line. main is a few lines around Main;
// commands are built by constructors with no package-level state.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/config"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/secret"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit statuses of the drover command.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// usageError marks an error in how drover was called (exit 2).
type usageError struct{ error }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// flagError is a command line drover could not parse (an unknown flag, a
// bad value): exit 2, with the hint to see --help.
type flagError struct{ error }

// exitError carries a specific exit status out of a command.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// Main runs drover with args and returns its exit status. The first SIGINT
// or SIGTERM cancels the running command gracefully (each agent gets
// SIGTERM and a grace period); a second one kills every agent process group
// at once. Either way the runs still end with their done events.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	stderr = &syncWriter{w: stderr} // shared with the signal goroutine
	// The signal goroutine is owned here: stopped and waited for on return.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 0; ; {
			select {
			case <-sigs:
				if n++; n == 1 {
					cancel()
				} else if k := proc.KillAll(); k > 0 {
					fmt.Fprintf(stderr, "drover: killed %d agent process group(s)\n", k)
				}
			case <-stop:
				return
			}
		}
	})
	defer func() {
		close(stop)
		wg.Wait()
	}()
	return Run(ctx, args, stdin, stdout, stderr)
}

// Run is Main with the caller's context and no signal handling: cancelling
// ctx is what the first signal does.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Log records come from the supervisor's goroutines while a command
	// writes its own messages: one lock keeps their lines whole. Nothing
	// drover writes there is a control sequence of its own, and errors
	// carry vendors' words: all of it is stripped (SEC-6).
	stderr = &syncWriter{w: inert{stderr}}
	return (&env{stdin: stdin, stdout: stdout, stderr: stderr, log: slog.New(slog.DiscardHandler)}).run(ctx, args)
}

// run runs drover with args in e.
// warnSecretFlags says so on w when a flag on the command line holds a
// secret (--token, a URL with a password, --env of a credential): a command line is in /proc/<pid>/cmdline for every process of
// the machine to read, agents included, which drover cannot blank
// (SEC-5); the environment variables can be.
func warnSecretFlags(cmd *cobra.Command, w io.Writer) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		held := f.Name == "token" || secret.InURL(f.Value.String())
		if sv, ok := f.Value.(pflag.SliceValue); ok && f.Name == "env" {
			for _, kv := range sv.GetSlice() {
				if k, v, ok := strings.Cut(kv, "="); ok && (secret.Name(k) || secret.InURL(v)) {
					held = true
				}
			}
		}
		if held {
			fmt.Fprintf(w, "drover: warning: --%s holds a secret, which every process on this machine can read on drover's command line; prefer its environment variable (docs/security.md)\n", f.Name)
		}
	})
}

func (e *env) run(ctx context.Context, args []string) int {
	stdin, stdout, stderr := e.stdin, e.stdout, e.stderr
	root := newRoot(e)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	var ee exitError
	var ue usageError
	var fe flagError
	var le lineError
	switch {
	case err == nil:
		return ExitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.As(err, &le):
		fmt.Fprintf(stderr, "drover: %v\n", le.msg)
		return ExitUsage
	case errors.As(err, &fe) || isFlagError(err):
		// Only a command line drover could not parse gets the hint; other
		// usage errors say what to do next themselves.
		fmt.Fprintf(stderr, "drover: %v\nRun 'drover --help' for usage.\n", err)
		return ExitUsage
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "drover: %v\n", err)
		return ExitUsage
	default:
		fmt.Fprintf(stderr, "drover: %v\n", err)
		return ExitFailure
	}
}

// env is what every command shares: its standard streams and the logger
// chosen by --log-level.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	log            *slog.Logger
	// server is the drover serve the command talks to (--server, else
	// DROVER_SERVER); "" means the local ledger.
	server string
	// ops are the service's operations `drover api` offers; nil means
	// api.Ops (a test adds one).
	ops []api.Op
}

func newRoot(e *env) *cobra.Command {
	var logLevel, serverURL string
	root := &cobra.Command{
		Use:   "drover",
		Short: "Run AI coding agents as supervised processes behind one interface",
		Long: `drover runs AI coding agents (Claude Code, Codex, Gemini CLI, OpenCode)
behind one event stream, one permission model, parallel runs and clean
cancellation.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			level, from := logLevel, "--log-level"
			if !cmd.Flags().Changed("log-level") {
				level, from = os.Getenv("DROVER_LOG_LEVEL"), "DROVER_LOG_LEVEL"
			}
			log, err := newLogger(e.stderr, level)
			if err != nil {
				return usagef("%s: %v", from, err)
			}
			e.log = log
			// Every command reads drover's configuration (the agents
			// file, at least); a run may have changed its mode (BND-3).
			if err := config.Keep(log); err != nil {
				return err
			}
			e.server = serverURL
			if !cmd.Flags().Changed("server") {
				e.server = os.Getenv(ServerEnv)
			}
			warnSecretFlags(cmd, e.stderr)
			return nil
		},
	}
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return flagError{err} })
	root.PersistentFlags().StringVar(&logLevel, "log-level", "", "what drover logs on stderr: off, error, warn, info or debug (default $DROVER_LOG_LEVEL, else error)")
	root.PersistentFlags().StringVar(&serverURL, "server", "", "talk to the drover serve at this URL (http://host:port) instead of the local ledger; its token from $DROVER_TOKEN (default $"+ServerEnv+")")
	root.AddCommand(newRunCmd(e), newAgentsCmd(e), newProfilesCmd(e), newFakemodelCmd(e),
		newPsCmd(e), newShowCmd(e), newLogsCmd(e), newCancelCmd(e), newWaitCmd(e), newSessionsCmd(e), newServeCmd(e), newWorkerCmd(e), newWorkersCmd(e),
		newInboxCmd(e), newPricesCmd(e), newApproveCmd(e), newDenyCmd(e), newSteerCmd(e), newInterruptCmd(e), newACPCmd(e), newMCPCmd(e), newAPICmd(e),
		newDiffCmd(e), newApplyCmd(e), newMergeCmd(e), newDiscardCmd(e), newReviseCmd(e), newCompareCmd(e), newGCCmd(e))
	return root
}

// newLogger returns the logger of level ("" is error), writing text
// records to w.
func newLogger(w io.Writer, level string) (*slog.Logger, error) {
	var l slog.Level
	switch strings.ToLower(level) {
	case "off":
		return slog.New(slog.DiscardHandler), nil
	case "", "error":
		l = slog.LevelError
	case "warn":
		l = slog.LevelWarn
	case "info":
		l = slog.LevelInfo
	case "debug":
		l = slog.LevelDebug
	default:
		return nil, fmt.Errorf("unknown level %q (off, error, warn, info or debug)", level)
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l})), nil
}

// syncWriter serialises the writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// isFlagError recognises cobra's own usage errors (unknown command, wrong
// argument count) that do not pass through the flag error func.
func isFlagError(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "accepts ", "requires at least", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}
