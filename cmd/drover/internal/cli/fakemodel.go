package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/fakemodel"
	"github.com/spf13/cobra"
)

func newFakemodelCmd(e *env) *cobra.Command {
	var addr, scriptPath, logPath string
	cmd := &cobra.Command{
		Use:   "fakemodel",
		Short: "Serve drover's scripted model API on 127.0.0.1 (offline rehearsals, tests)",
		Long: `Serve a scripted model API that agent CLIs can talk to instead of a real
model, on one loopback address: Anthropic Messages (Claude Code), OpenAI
Responses (Codex), OpenAI Chat Completions (OpenCode) and Gemini (Gemini CLI).
Answers come from a script (see docs/fakemodel.md); with no --script the
built-in demo script answers. Runs until interrupted.

'drover run --fakemodel' starts one in-process and points the agent at it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			script := fakemodel.DefaultScript()
			if scriptPath != "" {
				s, err := fakemodel.LoadScript(scriptPath)
				if err != nil {
					return usageError{err}
				}
				script = s
			}
			var logw io.Writer
			if logPath != "" {
				f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
				if err != nil {
					return usagef("--log: %v", err)
				}
				defer f.Close()
				logw = f
			}
			ready := func(url string) { fmt.Fprintf(e.stdout, "fakemodel listening on %s\n", url) }
			err := fakemodel.Serve(cmd.Context(), addr, script, logw, ready)
			return err
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8089", "loopback address to listen on (port 0 picks one)")
	cmd.Flags().StringVar(&scriptPath, "script", "", "script file (JSON)")
	cmd.Flags().StringVar(&logPath, "log", "", "append every request as a JSON line to this file")
	return cmd
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
