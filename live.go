package drover

import "time"

// LiveInput is one thing a live run's adapter must pass on to its vendor:
// exactly one field is set. After passing it on, the adapter yields Event()
// so that the stream (and the ledger) records it.
type LiveInput struct {
	Answer    *PermissionAnswerPayload
	Steer     *SteerPayload
	Interrupt *InterruptPayload
}

// Event returns the event recording in, without agent and session (the
// engine stamps them).
func (in LiveInput) Event() Event {
	switch {
	case in.Answer != nil:
		return Event{Type: TypePermissionAnswer, Timestamp: in.Answer.AnsweredAt, Payload: *in.Answer}
	case in.Steer != nil:
		return Event{Type: TypeSteer, Timestamp: time.Now().UnixMilli(), Payload: *in.Steer}
	case in.Interrupt != nil:
		return Event{Type: TypeInterrupt, Timestamp: time.Now().UnixMilli(), Payload: *in.Interrupt}
	}
	return Event{}
}

// Live is a run's control as its adapter sees it (Request.Live): the
// answers to the permission requests it yielded, steering messages and
// interrupts, in the order they came. The engine sets it only for an
// adapter whose Capabilities say it can take some of them, and only when
// the run can be answered or steered (see Options.Control).
//
// The adapter yields each permission request as a "permission_request"
// event with a RequestID unique in the run, then waits for its answer
// among the inputs; it must take the inputs until it returns.
type Live interface {
	// Ready returns a channel that has a value whenever Take has inputs.
	Ready() <-chan struct{}
	// Take returns the inputs that arrived since the last call, oldest
	// first, or none.
	Take() []LiveInput
}
