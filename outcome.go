package drover

// Outcome is how a run stands or ended, in the one vocabulary every face
// shows (the CLI, `ps`, `show`, the API and protocol, the dashboard, MCP
// and ACP): docs/events.md, "A run's outcome". A run's ledger status
// (pending, running, completed, failed) and its done status say the same
// in finer or coarser words; the outcome is the word a person reads.
type Outcome string

// Outcomes.
const (
	OutcomePending   Outcome = "pending"   // waiting for a slot or a worker
	OutcomeRunning   Outcome = "running"   // started, not ended
	OutcomeCompleted Outcome = "completed" // the agent finished its turn
	OutcomeFailed    Outcome = "failed"    // an error ended it (the vendor's, the model's, drover's)
	// OutcomeCancelled: a person or program cancelled it, or its parent
	// or the drover running it ended first.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeInterrupted: its turn was interrupted (CTL-3); its session
	// can be continued.
	OutcomeInterrupted Outcome = "interrupted"
	OutcomeTimedOut    Outcome = "timed_out"  // its timeout or idle timeout ended it
	OutcomeMaxTurns    Outcome = "max_turns"  // it reached its turn limit
	OutcomeMaxBudget   Outcome = "max_budget" // it reached its budget
)

// Outcomes lists every outcome, in the order docs/events.md gives them.
func Outcomes() []Outcome {
	return []Outcome{OutcomePending, OutcomeRunning, OutcomeCompleted, OutcomeFailed, OutcomeCancelled,
		OutcomeInterrupted, OutcomeTimedOut, OutcomeMaxTurns, OutcomeMaxBudget}
}

// Ended reports whether o is the outcome of a run that has ended.
func (o Outcome) Ended() bool { return o != OutcomePending && o != OutcomeRunning && o != "" }
