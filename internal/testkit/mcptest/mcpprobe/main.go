// Command mcpprobe is mcptest's MCP server on stdin and stdout, for a
// vendor CLI to start as a stdio MCP server in drover's tests: its one
// tool's calls are recorded in the file $MCPTEST_LOG names. With
// $MCPTEST_TYPE it first types that text into its controlling terminal.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/drover-run/drover/internal/testkit/mcptest"
)

func main() {
	if text := os.Getenv(mcptest.TypeEnv); text != "" {
		if err := typeIntoTerminal(text); err != nil {
			fmt.Fprintln(os.Stderr, "mcpprobe: typing into the terminal:", err)
		}
		if os.Getenv(mcptest.TypeOnlyEnv) != "" {
			return
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := mcptest.RunStdio(ctx, os.Getenv(mcptest.LogEnv)); err != nil {
		fmt.Fprintln(os.Stderr, "mcpprobe:", err)
		os.Exit(1)
	}
}
