package runner

import (
	"context"
	"io"
	"sync"
	"time"

	"github.com/drover-run/drover"
)

// converse drives a Conversation over the started process p, whose stdin
// reads from in: it writes Open, then serves the process's lines and the
// run's live inputs (none when live is nil) together until the process's
// stdout ends. It reports whether the attempt is to go on to the process's
// end (false: the consumer stopped, or reading failed, and the attempt is
// over). An Opener not opened within a.openTimeout is stopped; a
// Canceller is asked to cancel when ctx ends, and stopped cancelWait later.
//
// Goroutines: one line reader, owned here. It ranges over p.Lines and hands
// each line over, waiting until the line has been handled (the slice is
// only valid until then); on every way out converse closes quit, closes in
// (which ends proc's stdin copier, owned by p), stops p on an early return
// (which ends a read in progress), and waits for the reader. The writes
// themselves never block this loop: in queues them for proc's copier, so a
// vendor that stops reading its stdin, or exits, cannot stall the run.
func (a *attemptRun) converse(ctx context.Context, conv Conversation, live drover.Live, in *inputQueue, open []byte) (ok bool) {
	type item struct {
		raw []byte
		err error
	}
	lines := make(chan item)
	handled := make(chan struct{})
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(lines)
		for raw, err := range a.p.Lines() {
			select {
			case lines <- item{raw, err}:
			case <-quit:
				return
			}
			select {
			case <-handled:
			case <-quit:
				return
			}
		}
	})
	defer func() {
		close(quit)
		in.Close()
		if !ok {
			// The reader may be blocked reading stdout: stopping the
			// process closes it.
			a.p.Close()
		}
		wg.Wait()
	}()

	in.Write(open)
	// While the vendor starts up and reads its opening (the reader above
	// waits for its first line meanwhile).
	a.warm()
	var ready <-chan struct{}
	if live != nil {
		ready = live.Ready()
	}
	// The two timers below stop the process from their own goroutines
	// (p.Stop is safe for concurrent use); their channels are read here
	// only, so the conversation is never touched off this goroutine.
	var opening <-chan time.Time
	opener, _ := conv.(Opener)
	if opener != nil && a.openTimeout > 0 {
		t := time.NewTimer(a.openTimeout)
		defer t.Stop()
		opening = t.C
	}
	var cancelled <-chan struct{}
	canceller, _ := conv.(Canceller)
	if canceller != nil {
		cancelled = ctx.Done()
	}
	// flush writes what the translator has queued; once it closes stdin,
	// inputs are no longer taken: they could not reach the vendor, and
	// the engine records the answers among them itself.
	flush := func() {
		out, closeInput := conv.Outbox()
		in.Write(out)
		if closeInput {
			in.Close()
			ready = nil
		}
	}
	for {
		select {
		case it, more := <-lines:
			if !more {
				return true
			}
			cont := a.line(it.raw, it.err)
			if cont {
				flush()
			}
			handled <- struct{}{}
			if !cont {
				return false
			}
		case <-opening:
			opening = nil
			if !opener.Opened() {
				a.p.Stop(a.grace)
			}
		case <-cancelled:
			cancelled = nil
			req := canceller.Cancel()
			if len(req) == 0 {
				a.p.Stop(a.grace) // nothing to ask: stopped at once
				continue
			}
			in.Write(req)
			flush()
			t := time.AfterFunc(cancelWait, func() { a.p.Stop(a.grace) })
			defer t.Stop()
		case <-ready:
			for _, input := range live.Take() {
				out, err := conv.Pass(input)
				if err != nil && input.Answer == nil {
					continue // refused: neither written nor recorded
				}
				// An answer is recorded even when the vendor cannot take it
				// any more: the engine has decided the request, and the
				// ledger must show how.
				in.Write(out)
				if !a.yield(input.Event(), nil) {
					return false
				}
			}
			flush()
		}
	}
}

// line handles one line of a conversation: translated and yielded, then
// the linger watchdog updated. It reports whether to go on.
func (a *attemptRun) line(raw []byte, err error) bool {
	if err != nil {
		return a.readError(err)
	}
	evs, err := a.tr.Translate(raw)
	if err == nil && !a.emit(evs) {
		return false
	}
	a.lingerIf(a.tr.Finished())
	return true
}

// lingerIf keeps the linger watchdog (ADP-6) in step with a conversation:
// running, restarted by each line, while the vendor has printed its final
// result; stopped while it is at work again (a queued message started a
// new turn), which a one-shot process never is.
func (a *attemptRun) lingerIf(finished bool) {
	switch {
	case finished && a.timer == nil:
		a.timer = time.AfterFunc(a.linger, func() { a.p.Stop(a.grace) })
	case finished:
		a.timer.Reset(a.linger)
	case a.timer != nil:
		a.timer.Stop()
	}
}

// inputQueue is a process's stdin in a conversation: an io.Reader for
// proc.Spec.Stdin whose Read waits for what Write queues, and returns EOF
// once the queue is closed and drained. Write never blocks, however slowly
// the process reads (the queue is unbounded; a conversation's messages are
// small and few). Whoever owns the queue must Close it before waiting for
// the process: proc's copier reads it until EOF.
type inputQueue struct {
	mu     sync.Mutex
	cond   sync.Cond
	buf    []byte
	closed bool
}

func newInputQueue() *inputQueue {
	q := &inputQueue{}
	q.cond.L = &q.mu
	return q
}

// Write queues b for the process; after Close it drops b.
func (q *inputQueue) Write(b []byte) {
	if len(b) == 0 {
		return
	}
	q.mu.Lock()
	if !q.closed {
		q.buf = append(q.buf, b...)
		q.cond.Signal()
	}
	q.mu.Unlock()
}

// Close makes Read return EOF once what was queued has been read. It is
// idempotent.
func (q *inputQueue) Close() {
	q.mu.Lock()
	q.closed = true
	q.cond.Broadcast()
	q.mu.Unlock()
}

// Read implements io.Reader for proc's stdin copier.
func (q *inputQueue) Read(p []byte) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.buf) == 0 && !q.closed {
		q.cond.Wait()
	}
	if len(q.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, q.buf)
	q.buf = q.buf[n:]
	if len(q.buf) == 0 {
		q.buf = nil // let a drained queue's memory go
	}
	return n, nil
}
