//go:build unix

package runner

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
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
		return converseFake(mode, out)
	}
	return 0
}

// converseFake is a scripted conversational CLI: it reads JSON lines
// (fakeInput) on stdin and prints fakeMsg lines. Its modes:
//
//	ask          asks "r1" to run make; reports the answer as "said"; prints
//	             a result; exits 0 at stdin's EOF (4 if EOF came first)
//	chat         pings and waits for its pong; says every steering message
//	             back; prints a result after the message "finish"; exits 0
//	             at EOF
//	exit-asking  asks "r1" and exits 3 without reading anything
//	silent-ask   asks "r1" and sleeps without reading anything
//	linger       prints a result and sleeps, whatever comes on stdin
//	turns        prints a result, then starts a new turn, is silent for
//	             1.5 s, prints a second result; exits 0 at EOF
//	reject       with --resume: rejects it and exits 1; else prints a
//	             result and exits 0 at EOF
//	toolong      prints a line longer than proc's cap, then a result;
//	             exits 0 at EOF
//	mute         prints nothing and sleeps, whatever comes on stdin
//	cancellable  prints init, then waits for a "cancel" input: writes the
//	             file $RUNNER_FAKE_ARG, prints a result, exits 0 at EOF
//	write        writes the files of $RUNNER_FAKE_ARG, says how it went,
//	             prints a result, exits 0 at EOF
func converseFake(mode string, out *bufio.Writer) int {
	say := func(m fakeMsg) {
		printMsg(out, m)
		out.Flush()
	}
	in := json.NewDecoder(os.Stdin)
	next := func() (fakeInput, bool) {
		var m fakeInput
		return m, in.Decode(&m) == nil
	}
	untilEOF := func() int {
		for {
			if _, ok := next(); !ok {
				return 0
			}
		}
	}
	if mode == "reject" && slices.Contains(os.Args[1:], "--resume") {
		say(fakeMsg{Type: "rejected"})
		return 1
	}
	if mode == "mute" {
		time.Sleep(fakeLifetime)
		return 0
	}
	if m, ok := next(); !ok || m.Kind != "prompt" {
		fmt.Fprintf(os.Stderr, "fake: first input %+v, want the prompt\n", m)
		return 126
	}
	say(fakeMsg{Type: "init"})
	switch mode {
	case "ask", "exit-asking", "silent-ask":
		say(fakeMsg{Type: "ask", ID: "r1", Text: "make"})
		if mode == "exit-asking" {
			return 3
		}
		if mode == "silent-ask" {
			time.Sleep(fakeLifetime)
			return 0
		}
		for {
			m, ok := next()
			if !ok {
				return 4
			}
			if m.Kind == "answer" && m.ID == "r1" {
				if m.Allow {
					say(fakeMsg{Type: "said", Text: "allowed"})
				} else {
					say(fakeMsg{Type: "said", Text: "denied: " + m.Message})
				}
				say(fakeMsg{Type: "result", Text: "done"})
				return untilEOF()
			}
			say(fakeMsg{Type: "said", Text: "unexpected " + m.Kind})
		}
	case "chat":
		say(fakeMsg{Type: "ping"})
		if m, ok := next(); !ok || m.Kind != "pong" {
			return 5
		}
		say(fakeMsg{Type: "said", Text: "pong received"})
		for {
			m, ok := next()
			if !ok {
				return 6
			}
			say(fakeMsg{Type: "said", Text: m.Kind + ": " + m.Text})
			if m.Text == "finish" {
				say(fakeMsg{Type: "result", Text: "finished"})
				return untilEOF()
			}
		}
	case "linger":
		say(fakeMsg{Type: "result", Text: "done"})
		time.Sleep(fakeLifetime)
	case "turns":
		say(fakeMsg{Type: "result", Text: "first"})
		say(fakeMsg{Type: "turn"})
		time.Sleep(1500 * time.Millisecond)
		say(fakeMsg{Type: "result", Text: "second"})
		return untilEOF()
	case "reject":
		say(fakeMsg{Type: "result", Text: "fresh"})
		return untilEOF()
	case "cancellable":
		for {
			m, ok := next()
			if !ok {
				return 7
			}
			if m.Kind == "cancel" {
				os.WriteFile(os.Getenv(fakeArgEnv), []byte("cancelled"), 0o600)
				say(fakeMsg{Type: "result", Text: "cancelled"})
				return untilEOF()
			}
		}
	case "write":
		// Writes each file of $RUNNER_FAKE_ARG ("|"-separated), says how
		// each went and its TMPDIR, prints a result; exits 0 at EOF.
		res := map[string]string{"TMPDIR": os.Getenv("TMPDIR")}
		for _, f := range strings.Split(os.Getenv(fakeArgEnv), "|") {
			res[f] = "ok"
			if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
				res[f] = err.Error()
			}
		}
		b, _ := json.Marshal(res)
		say(fakeMsg{Type: "said", Text: string(b)})
		say(fakeMsg{Type: "result", Text: "done"})
		return untilEOF()
	case "toolong":
		out.WriteString(`{"type":"said","text":"`)
		out.Write(bytes.Repeat([]byte("x"), 64<<20))
		out.WriteString("\"}\n")
		say(fakeMsg{Type: "result", Text: "done"})
		return untilEOF()
	default:
		fmt.Fprintf(os.Stderr, "fake: unknown mode %q\n", mode)
		return 125
	}
	return 0
}

// fakeLifetime bounds every waiting fake, so a crashed test run cannot
// leave processes behind for long.
const fakeLifetime = 30 * time.Second

// fakeInput is a line the conversational fakes read on stdin.
type fakeInput struct {
	Kind    string `json:"kind"`
	ID      string `json:"id,omitempty"`
	Allow   bool   `json:"allow,omitempty"`
	Message string `json:"message,omitempty"`
	Text    string `json:"text,omitempty"`
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
