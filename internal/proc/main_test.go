//go:build unix

package proc

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The fake agents are this test binary re-executed with fakeAgentEnv set to
// a mode; TestMain then behaves as that agent instead of running tests.
const (
	fakeAgentEnv = "PROC_FAKE_AGENT"
	fakeArgEnv   = "PROC_FAKE_ARG"
)

// fakeLifetime bounds every sleeping fake, so a crashed test run cannot
// leave processes behind for long.
const fakeLifetime = 30 * time.Second

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeAgentEnv); mode != "" {
		os.Exit(runFakeAgent(mode, os.Getenv(fakeArgEnv)))
	}
	goleak.VerifyTestMain(m)
}

func fakeArgInt(arg string) int {
	n, err := strconv.Atoi(arg)
	if err != nil {
		panic(fmt.Sprintf("fake agent: bad arg %q", arg))
	}
	return n
}

// stderrPattern is the deterministic content the "stderr" fake writes.
func stderrPattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
		if i%100 == 99 {
			b[i] = '\n'
		}
	}
	return b
}

// bigJSONLine returns a JSON object line of exactly n bytes (no newline)
// whose payload makes truncation or corruption detectable.
func bigJSONLine(n int) []byte {
	const head, tail = `{"big":"`, `"}`
	b := make([]byte, n)
	copy(b, head)
	for i := len(head); i < n-len(tail); i++ {
		b[i] = '0' + byte(i%10)
	}
	copy(b[n-len(tail):], tail)
	return b
}

var benchText = strings.Repeat("x", 440)

// appendBenchLine appends the i-th benchmark line, about 500 bytes of JSON.
func appendBenchLine(b []byte, i int) []byte {
	b = append(b, `{"type":"assistant","seq":`...)
	b = strconv.AppendInt(b, int64(1e8+i), 10)
	b = append(b, `,"text":"`...)
	b = append(b, benchText...)
	return append(b, "\"}\n"...)
}

func printJSON(w io.Writer, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		os.Exit(120)
	}
}

// spawnGrandchild starts this binary again in mode, sharing our stdout and
// stderr, without waiting for it.
func spawnGrandchild(mode string, setsid bool) *exec.Cmd {
	return spawnGrandchildEnv(mode, setsid, os.Environ())
}

// spawnGrandchildEnv is spawnGrandchild with the environment env.
func spawnGrandchildEnv(mode string, setsid bool, env []string) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		panic(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(env, fakeAgentEnv+"="+mode)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if setsid {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	return cmd
}

func runFakeAgent(mode, arg string) int {
	out := bufio.NewWriterSize(os.Stdout, 64<<10)
	defer out.Flush()
	switch mode {
	case "lines": // arg JSON lines {"i":k}
		for i := range fakeArgInt(arg) {
			fmt.Fprintf(out, `{"i":%d}`+"\n", i)
		}
	case "sandwich": // good, an arg-byte JSON line, good
		fmt.Fprintln(out, `{"pos":"first"}`)
		out.Write(bigJSONLine(fakeArgInt(arg)))
		out.WriteString("\n")
		fmt.Fprintln(out, `{"pos":"last"}`)
	case "mixed":
		out.WriteString("starting up...\n")
		out.WriteString(`{"i":0}` + "\n")
		out.WriteString("\n")
		out.WriteString("   \t \n")
		out.WriteString(`[1,2,3]` + "\n")
		out.WriteString(`{"i":1}` + "\r\n")
		out.WriteString("WARN: something \x00\xff binary\n")
		out.WriteString(`  {"i":2}` + "\n")
		out.WriteString("\r\n")
		out.WriteString(`{"i":3}`) // final line without newline
	case "stderr": // arg bytes of stderrPattern to stderr, then exit 3
		if _, err := os.Stderr.Write(stderrPattern(fakeArgInt(arg))); err != nil {
			return 121
		}
		return 3
	case "two-phase": // one line; after stdin EOF, arg more lines; exit
		fmt.Fprintln(out, `{"phase":1}`)
		out.Flush()
		io.Copy(io.Discard, os.Stdin)
		for i := range fakeArgInt(arg) {
			fmt.Fprintf(out, `{"phase":2,"i":%d}`+"\n", i)
		}
	case "stdin-echo":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return 122
		}
		printJSON(out, map[string]any{"stdin": string(b), "n": len(b)})
	case "sleep": // announce, then sleep (default SIGTERM handling)
		printJSON(out, map[string]any{"ready": os.Getpid()})
		out.Flush()
		time.Sleep(fakeLifetime)
	case "sleep-ignore-term": // grandchild: ignore SIGTERM, announce, sleep
		signal.Ignore(syscall.SIGTERM)
		printJSON(out, map[string]any{"grandchild": os.Getpid()})
		out.Flush()
		time.Sleep(fakeLifetime)
	case "leader-ignore-term": // ignore SIGTERM, fork a grandchild that does too, sleep
		signal.Ignore(syscall.SIGTERM)
		gc := spawnGrandchild("sleep-ignore-term", false)
		printJSON(out, map[string]any{"leader": os.Getpid(), "child": gc.Process.Pid})
		out.Flush()
		time.Sleep(fakeLifetime)
	case "leader-exit-linger": // fork a grandchild holding stdout, exit 0 at once
		gc := spawnGrandchild("sleep-ignore-term", false)
		printJSON(out, map[string]any{"leader": os.Getpid(), "child": gc.Process.Pid})
	case "leader-exit-escape": // fork a setsid grandchild holding stdout, exit 0
		gc := spawnGrandchild("sleep", true)
		printJSON(out, map[string]any{"leader": os.Getpid(), "child": gc.Process.Pid})
	case "leader-exit-escape-untagged": // the same, the grandchild's environment without TagEnv
		env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, TagEnv+"=") })
		gc := spawnGrandchildEnv("sleep", true, env)
		printJSON(out, map[string]any{"leader": os.Getpid(), "child": gc.Process.Pid})
	case "write": // write the file arg, say how it went, then echo stdin
		res := "ok"
		if err := os.WriteFile(arg, []byte("x"), 0o600); err != nil {
			res = err.Error()
		}
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return 122
		}
		printJSON(out, map[string]any{"write": res, "stdin": string(b), "pid": os.Getpid(), "pgid": syscall.Getpgrp()})
	case "bench": // arg lines of ~500 bytes
		// Generated up front and written at once, so the benchmark measures
		// the reader rather than the writer.
		var all []byte
		for i := range fakeArgInt(arg) {
			all = appendBenchLine(all, i)
		}
		if _, err := os.Stdout.Write(all); err != nil {
			return 123
		}
	default:
		if code, ok := runLinuxFake(mode, out); ok {
			return code
		}
		fmt.Fprintf(os.Stderr, "fake agent: unknown mode %q\n", mode)
		return 125
	}
	return 0
}
