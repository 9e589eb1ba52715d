// Package proc runs vendor agent CLIs as child processes with the process
// hygiene every adapter shares (ADP-1): the child runs in its own process
// group, its stdout is read as JSON lines without a line-length trap, the tail
// of its stderr is kept for error messages, and stopping it leaves no member
// of its group, no goroutine and no file descriptor behind.
//
// Process groups are a Unix concept; on Windows Start reports that it is not
// supported.
package proc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/drover-run/drover/internal/contain"
)

// Defaults applied to zero-valued Spec fields.
const (
	// DefaultGrace is the SIGTERM→SIGKILL grace used when Spec.Grace is 0.
	DefaultGrace = 3 * time.Second
	// DefaultLingerGrace is used when Spec.LingerGrace is 0.
	DefaultLingerGrace = 500 * time.Millisecond
	// DefaultDrainTimeout is used when Spec.DrainTimeout is 0.
	DefaultDrainTimeout = 2 * time.Second
	// DefaultMaxLineBytes is the stdout line cap used when Spec.MaxLineBytes is 0.
	DefaultMaxLineBytes = 64 << 20
	// DefaultStderrTailBytes is the stderr tail size used when Spec.StderrTailBytes is 0.
	DefaultStderrTailBytes = 64 << 10
)

// Spec describes a child process to start. Zero values of the tuning fields
// select the documented defaults; negative values are treated as zero.
type Spec struct {
	Path string   // executable path (already resolved, e.g. by LookPath)
	Args []string // arguments, not including argv[0]
	Env  []string // full environment; nil means os.Environ()
	Dir  string   // working directory; "" = current

	// Stdin, if nil, makes the child's stdin /dev/null. Otherwise its content
	// is copied into a pipe to the child, which is then closed so the child
	// sees EOF. The copy runs in a goroutine owned by the Process; Wait waits
	// for it, so Stdin's Read must not block indefinitely (a bytes.Reader or
	// strings.Reader holding the prompt is the intended use). Copy errors,
	// such as the child exiting without reading everything, are ignored.
	Stdin io.Reader

	// Contain, when set, confines the process and everything it starts to
	// that policy's boundaries, enforced by the kernel (internal/contain):
	// this program's own executable is started as a launcher that
	// restricts itself and execs Path. The process, its pid, group, argv,
	// stdin, stdout, stderr and how it is stopped are as without it; only
	// what it may write (and read) differs. Start fails when containment
	// is unavailable (contain.Available) or Path is not an executable file.
	Contain *contain.Policy

	// Grace is the SIGTERM→SIGKILL grace used when ctx is cancelled and by
	// Close; 0 → DefaultGrace.
	Grace time.Duration
	// LingerGrace applies when the leader exits by itself while other members
	// of its group are still alive: they may linger this long before the
	// group gets SIGTERM, and again this long before it gets SIGKILL;
	// 0 → DefaultLingerGrace.
	LingerGrace time.Duration
	// DrainTimeout bounds how long, after the leader exited and the group was
	// killed, stdout and stderr may stay open (held by a process that escaped
	// the group, e.g. via setsid) before their read ends are closed to
	// unblock the readers; 0 → DefaultDrainTimeout.
	DrainTimeout time.Duration
	// MaxLineBytes caps a stdout line (excluding "\n" or "\r\n");
	// 0 → DefaultMaxLineBytes.
	MaxLineBytes int
	// StderrTailBytes is how much of the end of stderr is kept;
	// 0 → DefaultStderrTailBytes.
	StderrTailBytes int
}

func (s Spec) withDefaults() Spec {
	if s.Grace <= 0 {
		s.Grace = DefaultGrace
	}
	if s.LingerGrace <= 0 {
		s.LingerGrace = DefaultLingerGrace
	}
	if s.DrainTimeout <= 0 {
		s.DrainTimeout = DefaultDrainTimeout
	}
	if s.MaxLineBytes <= 0 {
		s.MaxLineBytes = DefaultMaxLineBytes
	}
	if s.StderrTailBytes <= 0 {
		s.StderrTailBytes = DefaultStderrTailBytes
	}
	return s
}

// TagEnv is the variable every started process gets in its environment,
// with a value of its own; its descendants inherit it, which is how those
// that left the process group are found and killed when it ends.
const TagEnv = "DROVER_PROC_TAG"

// newTag returns a TagEnv entry with a new random value.
func newTag() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return TagEnv + "=" + hex.EncodeToString(b[:])
}

// finalKillWait bounds how long cleanup waits, after the final SIGKILL, for
// the group's members to actually die; only a process stuck in
// uninterruptible sleep can exhaust it.
const finalKillWait = 2 * time.Second

// Process is a started child process and its process group. All methods are
// safe for concurrent use. Every Process must be waited for (Wait) or closed
// (Close, which also stops it) to release its goroutines and descriptors.
type Process struct {
	spec  Spec
	tag   string // the TagEnv entry of its environment
	cmd   *exec.Cmd
	pid   int
	start time.Time

	stdoutR *os.File
	stderrR *os.File
	stdinW  *os.File // nil when Spec.Stdin is nil
	stderr  *tailBuffer

	done        chan struct{} // leader exited and was reaped
	groupKilled chan struct{} // done, and the group got its final SIGKILL
	stopReq     chan struct{} // Stop or ctx cancellation asked for the end
	termSent    chan struct{} // the group was sent SIGTERM
	closeReq    chan struct{} // Close: skip waiting for the drain
	linesDone   chan struct{} // the Lines iteration returned
	stderrDone  chan struct{}
	stdinDone   chan struct{}

	stopOnce        sync.Once
	closeOnce       sync.Once
	closeStdoutOnce sync.Once
	stopGrace       time.Duration // written once before stopReq is closed

	linesStarted atomic.Bool
	skipped      atomic.Int64
	// readingSince is when the Lines reader entered a Read on stdout that
	// has not returned yet (Unix ns), 0 while it is not inside a Read.
	readingSince atomic.Int64

	waitErr error     // written by reap before done is closed
	ended   time.Time // written by reap before done is closed

	wg   sync.WaitGroup
	exit Exit // written by supervise before its wg.Done
}

// Start starts the process described by spec in its own process group and
// returns once it is running. When ctx is cancelled the process group is
// stopped as by Stop(spec.Grace). The returned Process must be closed (Close)
// or waited for (Wait) to release its resources. An error is returned, and
// nothing is left running, if the process cannot be started.
func Start(ctx context.Context, spec Spec) (*Process, error) {
	spec = spec.withDefaults()
	if spec.Path == "" {
		return nil, errors.New("start: empty executable path")
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	p, err := start(spec)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Path, err)
	}
	p.run(ctx)
	return p, nil
}

func start(spec Spec) (p *Process, err error) {
	tag := newTag()
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	cmd := &exec.Cmd{
		Path: spec.Path,
		Args: append([]string{spec.Path}, spec.Args...),
		Env:  append(slices.Clone(env), tag),
		Dir:  spec.Dir,
	}
	if err = setProcessGroup(cmd); err != nil {
		return nil, err
	}
	if spec.Contain != nil {
		if err = launchContained(cmd, *spec.Contain); err != nil {
			return nil, err
		}
	}

	var parentEnds, childEnds []*os.File
	defer func() {
		// The child holds its own copies of its ends after Start; ours must be
		// closed so that EOF on stdout means every writer is really gone.
		for _, f := range childEnds {
			_ = f.Close()
		}
		if err != nil {
			for _, f := range parentEnds {
				_ = f.Close()
			}
		}
	}()
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("pipe: %w", err)
		}
		return r, w, nil
	}

	// os.Pipe rather than StdoutPipe/an io.Writer: an *os.File is handed to
	// the child directly, so exec starts no copying goroutine and cmd.Wait
	// returns as soon as the leader is reaped, even when a grandchild keeps
	// the pipe open. Closing the read ends is then under our control.
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, stdoutR), append(childEnds, stdoutW)
	stderrR, stderrW, err := pipe()
	if err != nil {
		return nil, err
	}
	parentEnds, childEnds = append(parentEnds, stderrR), append(childEnds, stderrW)
	var stdinW *os.File
	if spec.Stdin != nil {
		var stdinR *os.File
		stdinR, stdinW, err = pipe()
		if err != nil {
			return nil, err
		}
		parentEnds, childEnds = append(parentEnds, stdinW), append(childEnds, stdinR)
		cmd.Stdin = stdinR
	}
	cmd.Stdout = stdoutW
	cmd.Stderr = stderrW

	started := time.Now()
	if err = cmd.Start(); err != nil {
		return nil, err
	}
	return &Process{
		spec:        spec,
		tag:         tag,
		cmd:         cmd,
		pid:         cmd.Process.Pid,
		start:       started,
		stdoutR:     stdoutR,
		stderrR:     stderrR,
		stdinW:      stdinW,
		stderr:      newTailBuffer(spec.StderrTailBytes),
		done:        make(chan struct{}),
		groupKilled: make(chan struct{}),
		stopReq:     make(chan struct{}),
		termSent:    make(chan struct{}),
		closeReq:    make(chan struct{}),
		linesDone:   make(chan struct{}),
		stderrDone:  make(chan struct{}),
		stdinDone:   make(chan struct{}),
	}, nil
}

func (p *Process) run(ctx context.Context) {
	register(p)
	p.wg.Add(3)
	go p.reap()
	go p.copyStderr()
	go p.supervise()
	if p.stdinW != nil {
		p.wg.Add(1)
		go p.copyStdin(p.spec.Stdin)
	} else {
		close(p.stdinDone)
	}
	if ctxDone := ctx.Done(); ctxDone != nil {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			select {
			case <-ctxDone:
				p.requestStop(p.spec.Grace)
			case <-p.groupKilled:
			}
		}()
	}
}

// launchContained makes cmd start its program through the launcher of
// internal/contain, contained by pol. The launcher could only report a
// program that cannot be executed by exiting, so that is checked here,
// where Start can return it as it does without containment.
func launchContained(cmd *exec.Cmd, pol contain.Policy) error {
	path := cmd.Path
	if !filepath.IsAbs(path) {
		// exec.Cmd takes a relative Path from Dir, and so does this.
		dir := cmd.Dir
		if dir == "" {
			dir = "."
		}
		abs, err := filepath.Abs(filepath.Join(dir, path))
		if err != nil {
			return err
		}
		path = abs
	}
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return err
	case fi.IsDir() || fi.Mode().Perm()&0o111 == 0:
		return &fs.PathError{Op: "exec", Path: path, Err: fs.ErrPermission}
	}
	launcher, entry, err := contain.Command(pol, path)
	if err != nil {
		return err
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	cmd.Path = launcher
	cmd.Env = append(slices.Clip(env), entry)
	return nil
}

// reap is the only caller of cmd.Wait. Since every stdio stream is an
// *os.File, Wait has no copying goroutines to wait for and returns as soon
// as the leader is reaped, which makes done precise.
func (p *Process) reap() {
	defer p.wg.Done()
	err := p.cmd.Wait()
	p.ended = time.Now()
	p.waitErr = err
	close(p.done)
}

func (p *Process) copyStderr() {
	defer p.wg.Done()
	defer close(p.stderrDone)
	buf := make([]byte, 4<<10) // stderr is a trickle: its tail only
	for {
		n, err := p.stderrR.Read(buf)
		if n > 0 {
			_, _ = p.stderr.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

func (p *Process) copyStdin(src io.Reader) {
	defer p.wg.Done()
	defer close(p.stdinDone)
	// A child that exits without reading all of its input makes the copy
	// fail with EPIPE; that is not a failure of the run, the exit status
	// tells what happened.
	// A small buffer: what drover writes to a vendor (prompts, answers,
	// steering) is small and seldom, and a server holds one per run. The
	// file is hidden behind a plain Writer, or its ReadFrom would copy
	// through a 32 KiB buffer of its own.
	_, _ = io.CopyBuffer(struct{ io.Writer }{p.stdinW}, src, make([]byte, 4<<10))
	_ = p.stdinW.Close()
}

// supervise owns every signal sent to the group, so Stop, ctx cancellation
// and the leader's own exit never race each other into conflicting
// sequences.
func (p *Process) supervise() {
	defer p.wg.Done()
	stopped := false
	select {
	case <-p.done:
	case <-p.stopReq:
		select {
		case <-p.done:
			// Both were ready: the leader ended by itself, which the Exit
			// should say.
		default:
			stopped = true
			_ = signalGroup(p.pid, syscall.SIGTERM)
			close(p.termSent)
			t := time.NewTimer(p.stopGrace)
			select {
			case <-p.done:
			case <-t.C:
			}
			t.Stop()
		}
	}
	// Always end with SIGKILL to the whole group, so members that ignored or
	// outlived SIGTERM do not survive the run; unless the leader ended by
	// itself and the group was then seen empty, as there is nothing left to
	// kill and the pgid is no longer reserved for us.
	if stopped || !p.cleanupLingerers() {
		_ = signalGroup(p.pid, syscall.SIGKILL)
	}
	<-p.done
	p.waitGroupGone(finalKillWait, nil)
	// A descendant that left the group (setsid, or a group of its own, as
	// Codex starts its shell snapshot) is out of reach of the group's
	// signals but still carries the tag in its environment: it is killed
	// too, so that nothing the vendor started outlives the run.
	killTagged(p.tag, finalKillWait)
	// Unregister before the group's id can be reused by anyone else.
	unregister(p)
	close(p.groupKilled)

	p.drain()
	p.exit = p.buildExit(stopped)
}

// cleanupLingerers handles a leader that exited by itself while other group
// members (e.g. a forked helper) are still running: they get LingerGrace to
// finish, then SIGTERM and another LingerGrace, after which supervise sends
// the final SIGKILL. A stop request cuts the waiting short. It reports
// whether the group was seen empty.
//
// The leader is already reaped here, so its pid could in principle be
// reused; but a pid stays reserved while it is the pgid of any process, so
// signalling -pgid is safe as long as the group was just seen alive.
func (p *Process) cleanupLingerers() (gone bool) {
	if !GroupAlive(p.pid) {
		return true
	}
	if p.waitGroupGone(p.spec.LingerGrace, p.stopReq) {
		return true
	}
	select {
	case <-p.stopReq:
		return false
	default:
	}
	_ = signalGroup(p.pid, syscall.SIGTERM)
	return p.waitGroupGone(p.spec.LingerGrace, p.stopReq)
}

// waitGroupGone polls until no member of the group is alive (true), or d
// elapses or stop is closed (false). There is no event for "a process group
// became empty", hence the polling, with a backoff to keep it cheap.
func (p *Process) waitGroupGone(d time.Duration, stop <-chan struct{}) bool {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	interval := 2 * time.Millisecond
	for {
		if !GroupAlive(p.pid) {
			return true
		}
		tick := time.NewTimer(interval)
		select {
		case <-tick.C:
		case <-deadline.C:
			tick.Stop()
			return !GroupAlive(p.pid)
		case <-stop:
			tick.Stop()
			return false
		}
		interval = min(2*interval, 50*time.Millisecond)
	}
}

// drain waits for the stream readers to reach EOF, then releases the
// parent's pipe ends. A process that escaped the group (setsid) may hold
// stdout open forever, so stdout is abandoned once the reader has waited on
// an empty pipe for DrainTimeout — never while the reader is busy with lines
// already read (the consumer may be slow; what is still in the pipe must
// not be lost). stderr and stdin get DrainTimeout from here. Close skips
// all waiting.
func (p *Process) drain() {
	began := time.Now()
	poll := time.NewTicker(20 * time.Millisecond)
	defer poll.Stop()
stdout:
	for {
		select {
		case <-p.linesDone:
			break stdout
		case <-p.closeReq:
			break stdout
		case <-poll.C:
			if p.stdoutStalled(began) {
				break stdout
			}
		}
	}
	p.closeStdout()
	timeout := time.NewTimer(max(0, p.spec.DrainTimeout-time.Since(began)))
	defer timeout.Stop()
wait:
	for _, ch := range []chan struct{}{p.stderrDone, p.stdinDone} {
		select {
		case <-ch:
		case <-timeout.C:
			break wait
		case <-p.closeReq:
			break wait
		}
	}
	_ = p.stderrR.Close()
	if p.stdinW != nil {
		_ = p.stdinW.Close()
	}
	<-p.stderrDone
	<-p.stdinDone
}

// stdoutStalled reports whether stdout should be given up: nobody ranges
// over Lines and DrainTimeout has passed, or the reader has been blocked in
// one Read for DrainTimeout counted from when draining began (the group is
// dead by then, so a Read blocked that long has an empty pipe and a writer
// outside the group).
func (p *Process) stdoutStalled(began time.Time) bool {
	d := p.spec.DrainTimeout
	if !p.linesStarted.Load() {
		return time.Since(began) >= d
	}
	since := p.readingSince.Load()
	if since == 0 {
		return false // the consumer is busy with lines already read
	}
	from := time.Unix(0, since)
	if from.Before(began) {
		from = began
	}
	return time.Since(from) >= d
}

// readWatcher reads stdout, recording when a Read is in progress.
type readWatcher struct{ p *Process }

func (r readWatcher) Read(b []byte) (int, error) {
	r.p.readingSince.Store(time.Now().UnixNano())
	n, err := r.p.stdoutR.Read(b)
	r.p.readingSince.Store(0)
	return n, err
}

func (p *Process) closeStdout() {
	p.closeStdoutOnce.Do(func() { _ = p.stdoutR.Close() })
}

func (p *Process) buildExit(stopped bool) Exit {
	e := Exit{
		Code:       -1,
		Stopped:    stopped,
		StderrTail: p.stderr.String(),
		Duration:   p.ended.Sub(p.start),
	}
	var ee *exec.ExitError
	if p.waitErr != nil && !errors.As(p.waitErr, &ee) {
		e.Err = p.waitErr
	}
	if st := p.cmd.ProcessState; st != nil {
		e.Code, e.Signal = exitStatus(st)
	}
	return e
}

func (p *Process) requestStop(grace time.Duration) {
	p.stopOnce.Do(func() {
		p.stopGrace = max(grace, 0)
		close(p.stopReq)
	})
}

// Pid returns the process id of the leader (the started executable).
func (p *Process) Pid() int { return p.pid }

// Pgid returns the id of the process group the leader was started in; it
// equals Pid. Record it to reap the group later with KillGroup.
func (p *Process) Pgid() int { return p.pid }

// Lines reads stdout in the caller's goroutine and yields each JSON line:
// a line whose first non-whitespace byte is '{', without its "\n" or
// "\r\n". The slice is only valid until the next iteration.
//
// A line longer than Spec.MaxLineBytes is discarded without being buffered
// and yields (nil, *LineTooLongError); reading continues with the next line.
// Non-JSON and blank lines are skipped and counted (see Skipped). The
// sequence ends at EOF of stdout (every writer closed), when the read end is
// closed (drain timeout or Close), or after yielding an unexpected read
// error once. Breaking out of the loop early is allowed; as nobody reads
// stdout afterwards, a child that keeps writing blocks once the pipe is
// full, so Stop or Close it. Lines must be ranged over at most once; a
// second iteration yields a single error.
//
// If Lines is never ranged over, Wait additionally waits DrainTimeout before
// closing stdout (and the child may block on a full pipe until stopped).
func (p *Process) Lines() iter.Seq2[[]byte, error] {
	return func(yield func([]byte, error) bool) {
		if !p.linesStarted.CompareAndSwap(false, true) {
			yield(nil, errors.New("proc: Lines ranged over more than once"))
			return
		}
		defer close(p.linesDone)
		scanLines(readWatcher{p}, readBufSize, p.spec.MaxLineBytes, &p.skipped, yield)
	}
}

// Skipped returns how many non-JSON or blank stdout lines Lines has skipped
// so far. Oversize lines are reported as errors, not counted here.
func (p *Process) Skipped() int { return int(p.skipped.Load()) }

// Stop ends the process group: SIGTERM to the group, up to grace for the
// leader to exit, then SIGKILL to the group, which is sent even if the
// leader exited in time so that no member survives. grace <= 0 means
// SIGKILL right after SIGTERM. Stop returns once the leader has exited and
// the group has been killed; it does not wait for the stream drain (see
// Wait). Stop is idempotent and safe from any goroutine; only the first
// call's grace (or ctx cancellation's Spec.Grace) is used. Stopping a
// process that already ended by itself does not mark the Exit as stopped.
func (p *Process) Stop(grace time.Duration) {
	p.requestStop(grace)
	<-p.groupKilled
}

// Done returns a channel that is closed when the leader has exited and been
// reaped. Other group members may still be being cleaned up; use Wait for
// the complete end.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait blocks until the leader exited, the rest of its group was killed,
// stdout and stderr were drained (or their read ends closed after
// DrainTimeout), and every goroutine of the Process ended; it then returns
// how the process ended. Wait does not stop the process. It is safe to call
// any number of times from any goroutine; all calls return the same Exit.
func (p *Process) Wait() Exit {
	p.wg.Wait()
	return p.exit
}

// Close stops the process if it is still running (as Stop(Spec.Grace)),
// closes the stdout read end at once (ending a concurrent Lines), and waits
// as Wait does. Afterwards no goroutine, file descriptor or group member of
// the run remains. Close is idempotent and always returns nil; it returns an
// error only to satisfy io.Closer. The outcome is available from Wait.
func (p *Process) Close() error {
	p.requestStop(p.spec.Grace)
	// SIGTERM goes first: a child blocked writing to a stdout closed before
	// it would die of SIGPIPE, which it cannot handle gracefully.
	select {
	case <-p.termSent:
	case <-p.done:
	}
	p.closeOnce.Do(func() { close(p.closeReq) })
	p.closeStdout()
	p.Wait()
	return nil
}

// StderrTail returns the last Spec.StderrTailBytes bytes of stderr received
// so far. It is safe to call concurrently with the running process.
func (p *Process) StderrTail() string { return p.stderr.String() }

// Exit is how a process ended.
type Exit struct {
	Code       int           // exit code; -1 if killed by a signal or unknown
	Signal     string        // terminating signal, e.g. "terminated", "killed"; "" if it exited normally
	Stopped    bool          // Stop or ctx cancellation initiated the end
	Err        error         // a Wait error other than a non-zero exit, if any
	StderrTail string        // last Spec.StderrTailBytes bytes of stderr
	Duration   time.Duration // from start until the leader was reaped
}

// Success reports whether the process exited normally with code 0.
func (e Exit) Success() bool { return e.Code == 0 && e.Signal == "" }

// String gives a short human description such as "exit status 3" or
// "killed by signal terminated".
func (e Exit) String() string {
	switch {
	case e.Signal != "":
		return "killed by signal " + e.Signal
	case e.Err != nil:
		return "wait failed: " + e.Err.Error()
	default:
		return fmt.Sprintf("exit status %d", e.Code)
	}
}

// OwnGroup makes cmd, not yet started, the leader of a process group (and
// session) of its own, as Start does for an agent: KillGroup with its pid
// then ends it and everything it started that stayed in the group. An
// error where the platform has no process groups.
func OwnGroup(cmd *exec.Cmd) error { return setProcessGroup(cmd) }
