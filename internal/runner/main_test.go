//go:build unix

package runner

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The fake CLIs are this test binary re-executed with fakeAgentEnv set to a
// mode; TestMain then behaves as that CLI instead of running tests.
const (
	fakeAgentEnv = "RUNNER_FAKE_AGENT"
	fakeArgEnv   = "RUNNER_FAKE_ARG"
)

// fakeLifetime bounds every waiting fake, so a crashed test run cannot
// leave processes behind for long.
const fakeLifetime = 30 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeAgentEnv); mode != "" {
		os.Exit(runFake(mode, os.Getenv(fakeArgEnv)))
	}
	goleak.VerifyTestMain(m)
}

// benchText pads a benchmark line to about 500 bytes.
var benchText = strings.Repeat("x", 440)

func runFake(mode, arg string) int {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	switch mode {
	case "bench": // arg text lines of ~500 bytes, then a result
		n, _ := strconv.Atoi(arg)
		io.Copy(io.Discard, os.Stdin)
		for i := range n {
			fmt.Fprintf(out, `{"type":"said","seq":%d,"text":"%s"}`+"\n", 1e8+i, benchText)
		}
		fmt.Fprintln(out, `{"type":"result","text":"ok"}`)
	default:
		fmt.Fprintf(os.Stderr, "fake: unknown mode %q\n", mode)
		return 125
	}
	return 0
}

// fakeMsg is a line the fakes print, and the test translator reads.
type fakeMsg struct {
	Type string `json:"type"`
	ID   string `json:"id,omitempty"`
	Text string `json:"text,omitempty"`
}

func printMsg(w io.Writer, m fakeMsg) {
	b, _ := json.Marshal(m)
	w.Write(append(b, '\n'))
}
