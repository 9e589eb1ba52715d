// Package runner is what every CLI adapter shares around its own
// translation: finding the binary, refusing unsupported options, running one
// vendor process with internal/proc, yielding translated events, the linger
// watchdog after a final result, holding "done" until the process is gone,
// the resume fallback (ADP-5), and the failure events of a process that ended
// without a result. A vendor package supplies a Vendor.
package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
)

// Translator turns one process's native lines into UES events.
type Translator interface {
	// Translate maps one native line to events. An error means the line
	// could not be decoded; it is skipped and the stream goes on.
	Translate(line []byte) ([]drover.Event, error)
	// Finished reports whether the vendor has printed its final result; the
	// linger watchdog starts then.
	Finished() bool
	// Finish is called once the process has exited. It returns the events
	// that end the run (normally the held "done") or, with resumeRejected,
	// says the vendor refused the resume token before starting a
	// conversation. Returning no events and false lets the runner report the
	// process's end as a failure.
	Finish(exit proc.Exit) (events []drover.Event, resumeRejected bool)
}

// Launch is one vendor process to start.
type Launch struct {
	Spec       proc.Spec
	Translator Translator
	// Cleanup, when set, runs after the process is gone (temporary config).
	Cleanup func()
}

// Vendor is what an adapter supplies to the runner.
type Vendor interface {
	// ID is the adapter id stamped on events.
	ID() string
	// Capabilities are checked against the options before anything starts.
	Capabilities() drover.Capabilities
	// Binary returns the CLI's path for these options.
	Binary(opts drover.Options) (string, error)
	// Prepare builds the process and translator of one attempt. An error
	// ends the run before the CLI starts (use *drover.Error for a code).
	Prepare(path string, req drover.Request) (*Launch, error)
}

// Settings tune the watchdogs.
type Settings struct {
	// Linger is how long a process may stay silent after its final result
	// before it is stopped (ADP-6); 0 → 2 s.
	Linger time.Duration
	// Grace is the SIGTERM→SIGKILL grace when stopping; 0 → proc default.
	Grace time.Duration
}

// Run is an Adapter's Run body: it yields the vendor's events, and when the
// vendor rejects opts.Resume, a recoverable RESUME_FAILED error followed by a
// fresh run without it.
func Run(ctx context.Context, v Vendor, req drover.Request, s Settings, yield func(drover.Event, error) bool) {
	if err := v.Capabilities().Unsupported(req.Options); err != nil {
		yield(drover.Event{}, err)
		return
	}
	path, err := v.Binary(req.Options)
	if err != nil {
		yield(drover.Event{}, &drover.Error{Code: drover.CodeNotInstalled, Message: err.Error(), Err: drover.ErrAgentNotInstalled})
		return
	}
	if !attempt(ctx, v, path, req, s, yield) {
		return
	}
	if !yield(drover.NewEvent(drover.TypeError, v.ID(), req.Options.SessionID, drover.ErrorPayload{
		Code: drover.CodeResumeFailed, Recoverable: true,
		Message: fmt.Sprintf("%s could not resume %q; starting a new conversation", v.ID(), req.Options.Resume),
	}), nil) {
		return
	}
	req.Options.Resume = ""
	attempt(ctx, v, path, req, s, yield)
}

// attempt runs one process and reports whether the vendor rejected the
// resume token (having yielded nothing of this attempt).
func attempt(ctx context.Context, v Vendor, path string, req drover.Request, s Settings, yield func(drover.Event, error) bool) (resumeRejected bool) {
	l, err := v.Prepare(path, req)
	if err != nil {
		yield(drover.Event{}, err)
		return false
	}
	if l.Cleanup != nil {
		defer l.Cleanup()
	}
	spec := l.Spec
	spec.Path = path
	if spec.Dir != "" {
		// Some CLIs (OpenCode) take their project directory from $PWD, which
		// the inherited environment has for drover's own directory.
		env := spec.Env
		if env == nil {
			env = os.Environ()
		}
		if abs, err := filepath.Abs(spec.Dir); err == nil {
			spec.Env = append(slices.Clone(env), "PWD="+abs)
		}
	}
	if s.Grace > 0 {
		spec.Grace = s.Grace
	}
	linger := s.Linger
	if linger <= 0 {
		linger = 2 * time.Second
	}
	p, err := proc.Start(ctx, spec)
	if err != nil {
		yield(drover.Event{}, &drover.Error{Code: drover.CodeAdapterError, Message: "start " + v.ID(), Err: err})
		return false
	}
	// Close stops whatever is left of the process group on every return
	// path, including the consumer breaking out of the loop.
	defer p.Close()
	req.ProcessStarted(p.Pid(), p.Pgid())

	// ADP-6: a process silent for the linger period after its final result
	// is stopped; output after the result (a background task reporting
	// back) restarts the period.
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	tr := l.Translator
	for raw, err := range p.Lines() {
		if err != nil {
			var tooLong *proc.LineTooLongError
			if errors.As(err, &tooLong) {
				if !yield(drover.NewEvent(drover.TypeError, v.ID(), req.Options.SessionID, drover.ErrorPayload{
					Code: drover.CodeLineTooLong, Message: err.Error(), Recoverable: true}), nil) {
					return false
				}
				continue
			}
			yield(drover.Event{}, &drover.Error{Code: drover.CodeAdapterError, Message: "read " + v.ID() + " output", Err: err})
			return false
		}
		if timer != nil {
			timer.Reset(linger)
		}
		evs, err := tr.Translate(raw)
		if err != nil {
			continue // an undecodable line is skipped, not fatal
		}
		if timer == nil && tr.Finished() {
			timer = time.AfterFunc(linger, func() { p.Stop(spec.Grace) })
		}
		for _, ev := range evs {
			if !yield(ev, nil) {
				return false
			}
		}
	}
	exit := p.Wait()
	final, rejected := tr.Finish(exit)
	if rejected && req.Options.Resume != "" && ctx.Err() == nil {
		return true
	}
	if len(final) > 0 {
		for _, ev := range final {
			if !yield(ev, nil) {
				return false
			}
		}
		return false
	}
	if ctx.Err() != nil {
		return false // the engine reports the interruption
	}
	yield(drover.Event{}, ExitError(v.ID(), exit))
	return false
}

// ExitError describes a process that ended without a final result: exit
// status and the last lines of its stderr. A clean exit is MISSING_DONE, any
// other PROCESS_EXIT.
func ExitError(id string, exit proc.Exit) *drover.Error {
	msg := fmt.Sprintf("%s ended without a result (%s)", id, exit)
	if tail := strings.TrimSpace(exit.StderrTail); tail != "" {
		msg += ": " + LastLines(tail, 5)
	}
	code := drover.CodeProcessExit
	if exit.Success() {
		code = drover.CodeMissingDone
	}
	return &drover.Error{Code: code, Message: msg}
}

// LastLines joins the last n lines of s with " | ".
func LastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
