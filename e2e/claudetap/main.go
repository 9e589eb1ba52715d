// Command claudetap runs a vendor CLI as a transparent tap: it starts the
// program named by $DROVERTEST_TAP_CLI with its own arguments, passes stdin and
// stdout through line by line, and records, in the order it sees them,
// what was written to the CLI and what the CLI printed, as JSON lines in
// the file $DROVERTEST_TAP_OUT. The e2e tests use it to capture real
// interactive streams for golden tests (see capture_claude_test.go).
//
// Records: {"args":[…],"env":{…}} first; then {"sent":LINE} per stdin
// line, {"closed":true} at stdin's end, {"line":LINE} per stdout line; and
// {"exit":CODE,"signal":NAME,"stderr":TEXT} last. SIGTERM and SIGINT are
// ignored: they reach the CLI in the same process group, and the tap
// records how it ended.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
)

func main() {
	signal.Ignore(syscall.SIGTERM, syscall.SIGINT)
	out, err := os.Create(os.Getenv("DROVERTEST_TAP_OUT"))
	if err != nil {
		os.Exit(120)
	}
	var mu sync.Mutex
	record := func(v map[string]any) {
		b, _ := json.Marshal(v)
		mu.Lock()
		out.Write(append(b, '\n'))
		mu.Unlock()
	}
	env := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, _ := strings.Cut(kv, "=")
		if k == "HOME" || strings.HasPrefix(k, "CLAUDE_") || strings.HasPrefix(k, "ANTHROPIC_BASE_URL") || k == "IS_SANDBOX" || k == "DISABLE_AUTOUPDATER" {
			env[k] = v
		}
	}
	record(map[string]any{"args": os.Args[1:], "env": env})

	cmd := exec.Command(os.Getenv("DROVERTEST_TAP_CLI"), os.Args[1:]...)
	var stderr strings.Builder
	cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		record(map[string]any{"exit": 127, "stderr": err.Error()})
		os.Exit(127)
	}
	go func() {
		r := bufio.NewReader(os.Stdin)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				record(map[string]any{"sent": strings.TrimSuffix(string(line), "\n")})
				stdin.Write(line)
			}
			if err != nil {
				record(map[string]any{"closed": true})
				stdin.Close()
				return
			}
		}
	}()
	r := bufio.NewReaderSize(stdout, 1<<20)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			record(map[string]any{"line": strings.TrimSuffix(string(line), "\n")})
			os.Stdout.Write(line)
		}
		if err != nil {
			break
		}
	}
	err = cmd.Wait()
	code, sig := 0, ""
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			sig = ws.Signal().String()
		}
	}
	record(map[string]any{"exit": code, "signal": sig, "stderr": stderr.String()})
	out.Close()
	os.Exit(max(code, 0))
}
