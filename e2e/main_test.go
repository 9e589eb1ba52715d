package e2e

import (
	"context"
	"iter"
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/engine"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// runOpts are a run's options and its in-process hooks, held together as
// a library user holds them before starting a run.
type runOpts struct {
	drover.Options
	engine.Hooks
}

// start runs agent on prompt with o through an engine over reg.
func (o runOpts) start(ctx context.Context, reg *drover.Registry, agent, prompt string) (iter.Seq[drover.Event], error) {
	return engine.New(reg).Start(ctx, engine.Request{Agent: agent, Prompt: prompt, Options: o.Options, Hooks: o.Hooks})
}
