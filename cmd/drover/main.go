// Command drover runs AI coding agents behind one interface. See README.md.
package main

import (
	"os"

	"github.com/drover-run/drover/cmd/drover/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
