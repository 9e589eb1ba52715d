// Command drover runs AI coding agents behind one interface. See README.md.
package main

import (
	"os"

	"github.com/drover-run/drover/cmd/drover/internal/cli"
	"github.com/drover-run/drover/internal/imagemem"
	"github.com/drover-run/drover/internal/proc"
	"github.com/drover-run/drover/internal/runner"
)

func main() {
	// Every linked package's initialisation is over: give back the image
	// pages it touched (a quarter of a `drover run`'s peak memory,
	// docs/performance.md). What the command goes on to use is mapped
	// again as it runs. Failing to is no reason not to run.
	_, _ = imagemem.Release()
	// The agents drover starts run as its user: without this they could
	// read drover's environment (its token, its ledger's address, the
	// credentials it keeps from them) from /proc (SEC-5). Failing to is no
	// reason not to run.
	_ = proc.ProtectSelf(func(name, value string) bool { return runner.Withheld(name, value, nil) })
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
