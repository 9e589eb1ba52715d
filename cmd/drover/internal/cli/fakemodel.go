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
		Use:               "fakemodel",
		PersistentPreRunE: localOnlyPreRun(e, "fakemodel"),
		Short:             "Serve drover's scripted model API on 127.0.0.1 (offline rehearsals, tests)",
		Long: `Serve a scripted model API that agent CLIs can talk to instead of a real
model, on one loopback address: Anthropic Messages (Claude Code), OpenAI
Responses (Codex), OpenAI Chat Completions (OpenCode) and Gemini (Gemini CLI).
Answers come from a script (see docs/fakemodel.md); with no --script the
built-in demo script answers. Runs until interrupted.

'drover run --fakemodel' starts one in-process and points the agent at it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			script, err := loadScript(scriptPath)
			if err != nil {
				return err
			}
			var logw io.Writer
			if logPath != "" {
				f, err := openRequestLog("--log", logPath)
				if err != nil {
					return err
				}
				defer f.Close()
				logw = f
			}
			ready := func(url string) { fmt.Fprintf(e.stdout, "fakemodel listening on %s\n", url) }
			return fakemodel.Serve(cmd.Context(), addr, script, logw, ready)
		},
	}
	cmd.Flags().StringVar(&addr, "addr", "127.0.0.1:8089", "loopback address to listen on (port 0 picks one)")
	cmd.Flags().StringVar(&scriptPath, "script", "", "script file (JSON)")
	cmd.Flags().StringVar(&logPath, "log", "", "append every request as a JSON line to this file")
	return cmd
}

// loadScript reads the script at path, or returns the built-in demo script
// for "". A script that cannot be read or parsed is a usage error.
func loadScript(path string) (*fakemodel.Script, error) {
	if path == "" {
		return fakemodel.DefaultScript(), nil
	}
	s, err := fakemodel.LoadScript(path)
	if err != nil {
		return nil, usageError{err}
	}
	return s, nil
}

// openRequestLog opens (creating) the file the flag named for appending
// fakemodel's request log.
func openRequestLog(flag, path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, usagef("%s: %v", flag, err)
	}
	return f, nil
}

// offline is a checked --fakemodel (with --fakemodel-script and
// --fakemodel-log) of run or serve: the script is loaded, but no server is
// started and no file created until start.
type offline struct {
	script  *fakemodel.Script
	logPath string
	state   string // drover's state directory
}

// newOffline returns nil when none of the --fakemodel flags was given.
func newOffline(enabled bool, scriptPath, logPath string) (*offline, error) {
	if !enabled && scriptPath == "" && logPath == "" {
		return nil, nil
	}
	script, err := loadScript(scriptPath)
	if err != nil {
		return nil, err
	}
	state, err := stateDir()
	if err != nil {
		return nil, err
	}
	return &offline{script: script, logPath: logPath, state: state}, nil
}

// start starts drover's scripted model server in-process and returns
// apply, which points a run's options at it (see defaults), and stop, which
// the caller must call once the runs have ended. On a nil o (no
// --fakemodel flag) it starts nothing: apply is nil and stop does nothing.
func (o *offline) start(e *env, announce bool) (apply func(*drover.Options), stop func(), err error) {
	if o == nil {
		return nil, func() {}, nil
	}
	srv := fakemodel.New(o.script)
	var logFile *os.File
	if o.logPath != "" {
		if logFile, err = openRequestLog("--fakemodel-log", o.logPath); err != nil {
			return nil, nil, err
		}
		srv.SetLog(logFile)
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
	return o.defaults(url), stop, nil
}

// defaults returns the function that points a run's options at the
// fakemodel at url, adding only what the run did not set: the endpoint, no
// API retries, and a configuration home under drover's state directory, so
// that the user's own is never touched.
func (o *offline) defaults(url string) func(*drover.Options) {
	return func(opts *drover.Options) {
		if opts.Endpoint == nil {
			opts.Endpoint = &drover.Endpoint{BaseURL: url, APIKey: "fakemodel"}
		}
		if opts.APIRetries == nil {
			zero := 0
			opts.APIRetries = &zero
		}
		if opts.ConfigDir == "" {
			opts.ConfigDir = filepath.Join(o.state, "fakemodel-home")
		}
	}
}
