package postgres

import (
	"context"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// Change notifications (DIST-3): every transaction that appends events or
// ends a run sends NOTIFY drover_events, and every control message or
// cancel request sends NOTIFY drover_controls, both delivered at commit.
// A Store that is asked (EventsChanged, ControlsChanged) LISTENs on one
// connection of its own and wakes its waiters, so that followers and run
// owners in any process learn of a change at once instead of polling.
const (
	chanEvents   = "drover_events"
	chanControls = "drover_controls"
)

// notifier is a Store's listener: started at the first wait, stopped by
// Close.
type notifier struct {
	once   sync.Once
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
	events wake
	ctls   wake
}

// wake is a broadcast: wait returns a channel that the next fire closes.
type wake struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *wake) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(chan struct{})
	}
	return w.ch
}

func (w *wake) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch != nil {
		close(w.ch)
		w.ch = nil
	}
}

// EventsChanged returns a channel closed at the next commit, by any
// process on the database, that appended events or ended a run — or when
// the listening connection was lost and re-established (something may
// have been missed meanwhile): re-read after it. Take it before reading,
// so that no change is missed.
func (s *Store) EventsChanged() <-chan struct{} {
	s.listen()
	return s.notify.events.wait()
}

// ControlsChanged is EventsChanged for control messages and cancel
// requests (PostControl, RequestCancel).
func (s *Store) ControlsChanged() <-chan struct{} {
	s.listen()
	return s.notify.ctls.wait()
}

func (s *Store) listen() {
	n := &s.notify
	n.once.Do(func() {
		n.ctx, n.stop = context.WithCancel(context.Background())
		n.wg.Go(s.listenLoop)
	})
}

// listenLoop LISTENs on a connection of its own and fires the waits at
// each notification. When the connection fails it fires both (a change
// may have gone unheard), waits a moment and connects again, until Close.
func (s *Store) listenLoop() {
	n := &s.notify
	for n.ctx.Err() == nil {
		err := s.listenOnce()
		n.ctls.fire()
		n.events.fire()
		if err != nil && n.ctx.Err() == nil {
			t := time.NewTimer(250 * time.Millisecond)
			select {
			case <-n.ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
}

func (s *Store) listenOnce() error {
	ctx := s.notify.ctx
	conn, err := pgx.ConnectConfig(ctx, s.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, `LISTEN `+chanEvents+`; LISTEN `+chanControls); err != nil {
		return err
	}
	// Listening now: whatever happened before is for the waiters to read.
	// Controls first: a waiter woken for events then knows this wake-up
	// of controls is behind it.
	s.notify.ctls.fire()
	s.notify.events.fire()
	for {
		m, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if m.Channel == chanControls {
			s.notify.ctls.fire()
		} else {
			s.notify.events.fire()
		}
	}
}

// closeNotifier stops the listener, if it was started, and waits for it.
func (s *Store) closeNotifier() {
	n := &s.notify
	n.once.Do(func() {}) // a later listen starts nothing
	if n.stop != nil {
		n.stop()
	}
	n.wg.Wait()
}

// notifyControls tells the run owners listening that a control message or
// cancel request was committed. It is best effort: an owner that misses
// it still finds the message at its next poll.
func (s *Store) notifyControls(ctx context.Context) {
	_, _ = s.pool.Exec(ctx, `SELECT pg_notify('`+chanControls+`', '')`)
}
