package e2e

import (
	"testing"

	"github.com/drover-run/drover/adapter/adaptertest"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
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
	t.Run("codex", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Harness{
			Adapter:       codex.New(),
			Binary:        vendorBin(t, "codex", "DROVER_CODEX_BIN"),
			UnknownResume: "99999999-2222-4333-8444-555555555555",
		})
	})
	t.Run("gemini", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Harness{
			Adapter:       gemini.New(),
			Binary:        vendorBin(t, "gemini", "DROVER_GEMINI_BIN"),
			UnknownResume: "99999999-2222-4333-8444-555555555555",
		})
	})
	t.Run("opencode", func(t *testing.T) {
		adaptertest.Run(t, adaptertest.Harness{
			Adapter:       opencode.New(),
			Binary:        vendorBin(t, "opencode", "DROVER_OPENCODE_BIN"),
			UnknownResume: "ses_0000000000000000000000unknown",
		})
	})
}
