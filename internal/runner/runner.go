// Package runner is the kit every CLI adapter is built from. Base supplies
// an adapter's shared half: finding the binary (ADP-1), availability
// (ADP-4), refusing unsupported options (ADP-3), running one vendor process
// with internal/proc, yielding translated events, the linger watchdog after
// a final result (ADP-6), holding "done" until the process is gone, the
// resume fallback (ADP-5) and the failure events of a process that ended
// without a result; and, for a run that can be answered or steered
// (drover.Request.Live), the conversation with a vendor that takes input
// while it runs (Conversation). A vendor package supplies Hooks (its
// capabilities and how to prepare one process) and a Translator for its
// native output, which it writes with Stamp, ToolCalls and StatusRules.
package runner

import (
	"context"
	"errors"
	"fmt"
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
	Finish(exit Exit) (events []drover.Event, resumeRejected bool)
}

// Conversation is a Translator whose vendor takes input while it runs: a
// stream of JSON messages on stdin (Claude Code's stream-json input) or a
// JSON-RPC session (Codex's app-server, ACP). A vendor's Prepare returns
// one when req.Live is set, with arguments for that mode, or for every run
// when the vendor speaks nothing else (Launch.Converse); the runner then
// keeps the process's stdin open as a pipe, writes Open first, passes the
// run's live inputs on with Pass (yielding each input's event once passed
// on), writes what Outbox queues after every Translate, and closes stdin
// when Outbox says so or the process has ended. Launch.Stdin is not used.
// Without a Live no inputs come.
type Conversation interface {
	Translator
	// Open returns what to write first: the prompt as the vendor's first
	// message, or the requests that start a session.
	Open() ([]byte, error)
	// Pass returns what passes in (a permission answer, a steering message,
	// an interrupt) on to the vendor. An error refuses the input: it is not
	// written, and its event is not recorded unless it is an answer (the
	// engine has decided the request; the ledger shows how, even if the
	// vendor can no longer take it).
	Pass(in drover.LiveInput) ([]byte, error)
	// Outbox returns what to write after the last Translate or Pass (a
	// reply to a request of the vendor's, the next request of a session),
	// and whether stdin is to be closed after it.
	Outbox() (out []byte, closeInput bool)
}

// Opener is a Conversation that says when its vendor has answered its
// opening (ACP's initialize and session). With Launch.OpenTimeout set, the
// runner stops a vendor that has not answered by then; the conversation's
// Finish then reports it (the process's Exit says Stopped). Without this a
// vendor that never answers would hang the run until its timeout.
type Opener interface {
	Conversation
	// Opened reports whether the vendor has answered the opening.
	Opened() bool
}

// Canceller is a Conversation whose vendor can be asked to end its turn
// (ACP's session/cancel). When the run's context is cancelled, the runner
// writes Cancel's bytes first and stops the process only if it has not
// ended a short while later (cancelWait), instead of stopping it at once.
type Canceller interface {
	Conversation
	// Cancel returns what asks the vendor to end its turn; nothing (no
	// turn is running) has the process stopped at once.
	Cancel() []byte
}

// cancelWait is how long a Canceller's vendor has, after its cancel
// request, to end before it is stopped.
const cancelWait = time.Second

// Exit is how a vendor process ended (proc.Exit), named here so that a
// vendor package needs no other internal package than this kit.
type Exit = proc.Exit

// Launch is one vendor process to start: what is the vendor's own about it.
// Base adds the rest: the binary's path, Options.Cwd as the working
// directory (and $PWD), its own process group, the stop grace.
type Launch struct {
	// Args are the CLI's arguments.
	Args []string
	// Env is its environment; nil means Environ(nil), drover's own without
	// drover's variables and credentials.
	Env []string
	// Stdin is written to its standard input, which is then closed: the
	// prompt, for the CLIs that read it there.
	Stdin string
	// Translator translates what it prints.
	Translator Translator
	// Cleanup, when set, runs after the process is gone (temporary config).
	Cleanup func()
	// Converse, with a Translator that is a Conversation, drives the
	// conversation even without a Live: for a vendor that speaks nothing
	// else (ACP). No inputs come then.
	Converse bool
	// OpenTimeout, with a Translator that is an Opener, bounds how long the
	// vendor may take to answer its opening; 0 means no bound.
	OpenTimeout time.Duration
	// Writable are the directories the vendor keeps its own state in
	// (config home, caches, sessions), absolute: a contained run may write
	// beneath them besides its workspace and TMPDIR. Those missing are
	// created (0700) before the vendor starts, since it could not.
	Writable []string
	// WritableFiles are single files of the vendor's own a contained run
	// may write (not create), absolute.
	WritableFiles []string
}

// defaultLinger is Spec.Linger's default: long enough for a CLI to flush
// its session files after its final result.
const defaultLinger = 2 * time.Second

// run is an Adapter's Run body: it yields the vendor's events, and when the
// vendor rejects opts.Resume, a recoverable RESUME_FAILED error followed by a
// fresh run without it.
func (b *Base) run(ctx context.Context, req drover.Request, yield func(drover.Event, error) bool) {
	if err := b.hooks.Capabilities().Unsupported(req.Options); err != nil {
		yield(drover.Event{}, err)
		return
	}
	if err := unenforcedLimits(b.hooks.Capabilities(), req.Options); err != nil {
		yield(drover.Event{}, err)
		return
	}
	path, err := b.Binary(req.Options)
	if err != nil {
		yield(drover.Event{}, &drover.Error{Code: drover.CodeNotInstalled, Message: err.Error(), Err: drover.ErrAgentNotInstalled})
		return
	}
	if !b.attempt(ctx, path, req, yield) {
		return
	}
	// init is always a run's first event: the RESUME_FAILED error of the
	// rejected attempt is held until the fresh attempt's init is out.
	failed := drover.NewEvent(drover.TypeError, b.spec.ID, req.Options.SessionID, drover.ErrorPayload{
		Code: drover.CodeResumeFailed, Recoverable: true,
		Message: fmt.Sprintf("%s could not resume %q; starting a new conversation", b.spec.ID, req.Options.Resume),
	})
	held := true
	req.Options.Resume = ""
	b.attempt(ctx, path, req, func(ev drover.Event, err error) bool {
		if held {
			held = false
			if err == nil && ev.Type == drover.TypeInit {
				return yield(ev, nil) && yield(failed, nil)
			}
			if !yield(failed, nil) {
				return false
			}
		}
		return yield(ev, err)
	})
}

// attempt runs one process and reports whether the vendor rejected the
// resume token (having yielded nothing of this attempt). With req.Live set
// and a translator that is a Conversation, the process is a conversation
// (see Conversation and converse); otherwise it gets Launch.Stdin and its
// stdin is closed.
func (b *Base) attempt(ctx context.Context, path string, req drover.Request, yield func(drover.Event, error) bool) (resumeRejected bool) {
	id := b.spec.ID
	c, err := decideContainment(req.Options, b.hooks.Capabilities(), req.Live != nil)
	if err != nil {
		yield(drover.Event{}, err)
		return false
	}
	defer c.cleanup()
	yield = c.stamp(yield)
	// Prepare sees the decision, not the request: a vendor that sandboxes
	// its own commands hands that to the kernel only when contained.
	req.Options.Contain = &c.on
	l, err := b.hooks.Prepare(req)
	if err != nil {
		yield(drover.Event{}, err)
		return false
	}
	if l.Cleanup != nil {
		defer l.Cleanup()
	}
	pol, err := c.policy(req.Options, l, path)
	if err != nil {
		yield(drover.Event{}, err)
		return false
	}
	conv, _ := l.Translator.(Conversation)
	if req.Live == nil && !l.Converse {
		conv = nil
	}
	env := l.Env
	if env == nil {
		env = Environ(nil)
	}
	spec := proc.Spec{Path: path, Args: l.Args, Env: c.env(env), Dir: req.Options.Cwd, Contain: pol}
	var (
		in   *inputQueue
		open []byte
	)
	if conv != nil {
		if open, err = conv.Open(); err != nil {
			yield(drover.Event{}, &drover.Error{Code: drover.CodeAdapterError, Message: "open " + id + " conversation", Err: err})
			return false
		}
		in = newInputQueue()
		spec.Stdin = in
	} else {
		spec.Stdin = strings.NewReader(l.Stdin)
	}
	if spec.Dir != "" {
		// Some CLIs (OpenCode) take their project directory from $PWD, which
		// the inherited environment has for drover's own directory.
		if abs, err := filepath.Abs(spec.Dir); err == nil {
			spec.Env = append(slices.Clone(spec.Env), "PWD="+abs)
		}
	}
	// The watchdog's Stop below takes the grace explicitly; 0 there would
	// not mean proc's default.
	spec.Grace = b.spec.Grace
	if spec.Grace <= 0 {
		spec.Grace = proc.DefaultGrace
	}
	linger := b.spec.Linger
	if linger <= 0 {
		linger = defaultLinger
	}
	procCtx := ctx
	if _, ok := conv.(Canceller); ok {
		// The conversation loop asks the vendor to end its turn when ctx
		// ends, and stops it only if it does not: proc must not stop it
		// first.
		if ctx.Err() != nil {
			return false
		}
		procCtx = context.WithoutCancel(ctx)
	}
	p, err := proc.Start(procCtx, spec)
	if err != nil {
		yield(drover.Event{}, &drover.Error{Code: drover.CodeAdapterError, Message: "start " + id, Err: err})
		return false
	}
	// Close stops whatever is left of the process group on every return
	// path, including the consumer breaking out of the loop.
	defer p.Close()
	req.ProcessStarted(p.Pid(), p.Pgid())

	a := &attemptRun{id: id, sessionID: req.Options.SessionID, yield: yield, p: p, tr: l.Translator,
		linger: linger, grace: spec.Grace, openTimeout: l.OpenTimeout}
	defer func() {
		if a.timer != nil {
			a.timer.Stop()
		}
	}()
	if conv != nil {
		if !a.converse(ctx, conv, req.Live, in, open) {
			return false
		}
	} else if !a.oneShot() {
		return false
	}
	exit := p.Wait()
	final, rejected := a.tr.Finish(exit)
	if rejected && req.Options.Resume != "" && ctx.Err() == nil {
		return true
	}
	if len(final) > 0 {
		a.emit(final)
		return false
	}
	if ctx.Err() != nil {
		return false // the engine reports the interruption
	}
	yield(drover.Event{}, ExitError(id, exit))
	return false
}

// attemptRun is one started vendor process of an attempt and what reading
// it needs, shared by the one-shot and the conversation loops.
type attemptRun struct {
	id        string
	sessionID string
	yield     func(drover.Event, error) bool
	p         *proc.Process
	tr        Translator
	linger    time.Duration
	grace     time.Duration
	timer     *time.Timer // the linger watchdog, once started
	// openTimeout is Launch.OpenTimeout, for an Opener.
	openTimeout time.Duration
}

// oneShot yields the translated lines of a process whose input is already
// given, until its stdout ends. It reports whether to go on to the
// process's end (false: the consumer stopped, or reading failed).
func (a *attemptRun) oneShot() bool {
	a.warm()
	for raw, err := range a.p.Lines() {
		if err != nil {
			if !a.readError(err) {
				return false
			}
			continue
		}
		// ADP-6: a process silent for the linger period after its final
		// result is stopped; output after the result (a background task
		// reporting back) restarts the period.
		if a.timer != nil {
			a.timer.Reset(a.linger)
		}
		evs, err := a.tr.Translate(raw)
		if err != nil {
			continue // an undecodable line is skipped, not fatal
		}
		if a.timer == nil && a.tr.Finished() {
			a.startLinger()
		}
		if !a.emit(evs) {
			return false
		}
	}
	return true
}

func (a *attemptRun) startLinger() {
	a.timer = time.AfterFunc(a.linger, func() { a.p.Stop(a.grace) })
}

// readError reports a line that could not be read: an oversize line is a
// recoverable LINE_TOO_LONG and reading goes on; anything else ends the
// run. It reports whether to go on.
func (a *attemptRun) readError(err error) bool {
	var tooLong *proc.LineTooLongError
	if errors.As(err, &tooLong) {
		return a.yield(drover.NewEvent(drover.TypeError, a.id, a.sessionID, drover.ErrorPayload{
			Code: drover.CodeLineTooLong, Message: err.Error(), Recoverable: true}), nil)
	}
	a.yield(drover.Event{}, &drover.Error{Code: drover.CodeAdapterError, Message: "read " + a.id + " output", Err: err})
	return false
}

// emit yields evs, reporting whether the consumer wants more.
func (a *attemptRun) emit(evs []drover.Event) bool {
	for _, ev := range evs {
		if !a.yield(ev, nil) {
			return false
		}
	}
	return true
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

// unenforcedLimits returns an UNSUPPORTED_OPTION error when o has a turn
// or budget limit that the vendor does not enforce itself (NativeMaxTurns,
// NativeMaxBudget), or nil. The engine takes such limits out of the
// options an adapter gets and enforces them (engine/limits.go); an adapter run
// without the engine refuses them with this check rather than run
// unlimited.
func unenforcedLimits(c drover.Capabilities, o drover.Options) error {
	for _, l := range []struct {
		set, native bool
		name        string
	}{{o.MaxTurns > 0, c.NativeMaxTurns, "maxTurns"}, {o.MaxBudgetUSD > 0, c.NativeMaxBudget, "maxBudgetUsd"}} {
		if l.set && !l.native {
			return &drover.Error{Code: drover.CodeUnsupportedOption, Message: l.name + " is enforced by drover's engine for this agent, not by the agent itself: run it through engine.Engine"}
		}
	}
	return nil
}
