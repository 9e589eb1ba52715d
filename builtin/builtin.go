// Package builtin registers drover's built-in adapters. It is the one place
// that lists them; nothing registers itself from init().
package builtin

import (
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/claude"
	"github.com/drover-run/drover/adapter/codex"
	"github.com/drover-run/drover/adapter/gemini"
	"github.com/drover-run/drover/adapter/opencode"
)

// Registry returns a new registry holding every built-in adapter.
func Registry() *drover.Registry {
	reg := drover.NewRegistry()
	must(reg.Register(claude.New(), claude.Alias))
	must(reg.Register(codex.New()))
	must(reg.Register(gemini.New()))
	must(reg.Register(opencode.New()))
	return reg
}

func must(err error) {
	if err != nil {
		panic(err) // built-in ids are constants; a clash is a programming error
	}
}
