package e2e

import (
	"testing"

	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/adapter/claude"
)

// TestConformance runs the same scenarios against every real vendor CLI.
func TestConformance(t *testing.T) {
	t.Run("claude-code", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Harness{
			Adapter:       claude.New(),
			Binary:        claudeBin(t),
			UnknownResume: "99999999-2222-4333-8444-555555555555",
		})
	})
}
