//go:build linux

// Command bench is drover's benchmark harness (docs/performance.md); run
// it through scripts/bench. Under a vendor's command name it is the fake
// vendor CLI the benchmarks run.
package main

import (
	"os"
	"path/filepath"

	"github.com/drover-run/drover/internal/testkit/bench"
)

func main() {
	if bench.IsFake() {
		os.Exit(bench.FakeMain(filepath.Base(os.Args[0]), os.Args[1:]))
	}
	os.Exit(bench.Main(os.Args[1:], os.Stdout, os.Stderr))
}
