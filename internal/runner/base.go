package runner

import (
	"context"
	"iter"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/proc"
)

// Spec describes a vendor CLI to Base.
type Spec struct {
	// ID is the adapter id stamped on events ("claude-code").
	ID string
	// Command is the executable looked up on PATH ("claude").
	Command string
	// BinaryEnv names the environment variable that, when set, gives the
	// binary's path instead of PATH (DROVER_CLAUDE_BIN).
	BinaryEnv string
	// VersionArgs make the CLI print its version; nil means --version.
	VersionArgs []string
	// TestedVersions are the versions the adapter is proven against; Available
	// marks only these as tested (ADP-4).
	TestedVersions []string
	// Linger is how long a process may stay silent after its final result
	// before it is stopped (ADP-6); 0 means 2 s.
	Linger time.Duration
	// Grace is the SIGTERM→SIGKILL grace when a process is stopped; 0 means
	// proc.DefaultGrace.
	Grace time.Duration
}

// Hooks is a vendor's own half of an adapter: what it honours, and how one
// attempt of a run is started.
type Hooks interface {
	// Capabilities are checked against the options before anything starts;
	// an option they do not cover fails the run with UNSUPPORTED_OPTION.
	Capabilities() drover.Capabilities
	// Prepare builds the process and the translator of one attempt; the
	// translator stamps its events with Base.Stamp(req). Prepare is called
	// again, without Options.Resume, for the fresh attempt after a rejected
	// resume. An error ends the run before the CLI starts (a *drover.Error
	// gives its code); Launch.Cleanup is not called then, so Prepare undoes
	// its own partial work. req.Options.Contain is set to whether this
	// process runs contained (SEC-2): the decision, not the request.
	Prepare(req drover.Request) (*Launch, error)
}

// Base is the shared half of a CLI adapter. A vendor package embeds it in its
// Adapter, gives that Adapter Capabilities and Prepare (the Hooks), and
// builds it with New, which points the Base back at the Adapter's hooks:
// Go has no virtual methods for Base to call instead.
//
//	type Adapter struct{ runner.Base }
//
//	func New() *Adapter { return runner.New(&Adapter{}, runner.Spec{ID: ID, …}) }
//
// *Adapter is then a drover.Adapter. The zero Base is not usable.
type Base struct {
	spec  Spec
	hooks Hooks
}

// Embedder is what New accepts: a pointer to a vendor's Adapter struct,
// which embeds Base (supplying the unexported method, so nothing else can
// be one) and has the Hooks.
type Embedder interface {
	Hooks
	base() *Base
}

func (b *Base) base() *Base { return b }

// New sets up adapter, a vendor's new zero Adapter, as the adapter spec
// describes: its embedded Base then calls adapter's own Hooks. It returns
// adapter.
func New[A Embedder](adapter A, spec Spec) A {
	*adapter.base() = Base{spec: spec, hooks: adapter}
	return adapter
}

// ID returns the adapter id.
func (b *Base) ID() string { return b.spec.ID }

// Binary finds the CLI: opts.Binary when set, else the BinaryEnv variable,
// else Command on PATH. The error names BinaryEnv when nothing is found.
func (b *Base) Binary(opts drover.Options) (string, error) {
	if opts.Binary != "" {
		return opts.Binary, nil
	}
	return proc.LookPath(b.spec.Command, b.spec.BinaryEnv)
}

// Available finds the CLI as Binary does with no options and runs it with
// VersionArgs, bounded by ctx (ADP-4).
func (b *Base) Available(ctx context.Context) drover.Availability {
	args := b.spec.VersionArgs
	if args == nil {
		args = []string{"--version"}
	}
	return available(ctx, func() (string, error) { return b.Binary(drover.Options{}) }, args, b.spec.TestedVersions)
}

// Stamp returns the Stamp of req's events: this adapter's id, the
// session id, the wall clock. A vendor's Prepare gives it to its translator.
func (b *Base) Stamp(req drover.Request) Stamp {
	return Stamp{Agent: b.spec.ID, SessionID: req.Options.SessionID, Now: time.Now}
}

// Run starts the CLI and yields its events; see drover.Adapter for the
// contract. Options the Hooks' Capabilities do not cover, and a CLI that is
// not found, end the run with one error before anything starts.
func (b *Base) Run(ctx context.Context, req drover.Request) iter.Seq2[drover.Event, error] {
	return func(yield func(drover.Event, error) bool) { b.run(ctx, req, yield) }
}
