// Command fakeagent is drover's scripted ACP agent (acptest.Agent), built
// by acptest.Build for tests.
package main

import (
	"fmt"
	"os"
	"slices"

	"github.com/drover-run/drover/adapter/acp/acptest"
)

func main() {
	if slices.Contains(os.Args[1:], "--version") {
		fmt.Println("fake-acp " + acptest.Version)
		return
	}
	os.Exit(acptest.Agent(os.Getenv(acptest.ModeEnv), os.Stdin, os.Stdout))
}
