package runs

import "time"

// Wake-ups from a ledger shared with other processes (store/postgres:
// LISTEN/NOTIFY, DIST-3): followers of runs owned elsewhere are woken
// when any process records events or ends a run, and owners when a
// control message or cancel request is posted, instead of polling every
// Config.Poll. A ledger without them (SQLite) is polled as before.

// ledgerNotifier is a ledger that tells of changes made by any process.
// Each returns a channel closed at the next change (take it before
// reading).
type ledgerNotifier interface {
	EventsChanged() <-chan struct{}
	ControlsChanged() <-chan struct{}
}

// fallbackPoll is how often followers re-read a notifying ledger without
// news: a safety net, not the way changes arrive.
const fallbackPoll = 5 * time.Second

// remotePoll is how long a follower of runs owned elsewhere waits for
// news before it reads the ledger again.
func (s *Supervisor) remotePoll() time.Duration {
	if _, ok := s.st.(ledgerNotifier); ok {
		return fallbackPoll
	}
	return s.cfg.Poll
}

// controlsChanged returns the ledger's control wake-up, or nil (never
// ready) for a ledger without one.
func (s *Supervisor) controlsChanged() <-chan struct{} {
	if n, ok := s.st.(ledgerNotifier); ok {
		return n.ControlsChanged()
	}
	return nil
}

// bridgeLedger fires EventsRecorded whenever the ledger reports events
// recorded (or a run ended) by any process, until the supervisor closes.
// It is started by New and waited for by Close.
func (s *Supervisor) bridgeLedger() {
	n, ok := s.st.(ledgerNotifier)
	if !ok {
		return
	}
	for {
		ch := n.EventsChanged()
		select {
		case <-s.ctx.Done():
			return
		case <-ch:
			s.recorded.fire()
		}
	}
}
