//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/drover-run/drover/internal/jsonrpc"
)

// The fake's environment: its script. Everything else it is given (the
// command line, stdin) it takes as the real CLI would.
const (
	// RoleEnv makes the executable the fake whatever its name ("fake"),
	// or a child of a fake that only waits to be killed ("child").
	RoleEnv = "DROVERTEST_BENCH_ROLE"
	// LinesEnv is how many body lines to print (default 1000).
	LinesEnv = "DROVERTEST_BENCH_LINES"
	// RateEnv paces the body lines, per second; 0 or unset: as fast as
	// the reader takes them.
	RateEnv = "DROVERTEST_BENCH_RATE"
	// TextEnv is the mean length of a body line's text, in characters;
	// unset: the shape's default (Shape.TextChars).
	TextEnv = "DROVERTEST_BENCH_TEXT"
	// StampEnv names the file the fake writes its Stamp to (JSON).
	StampEnv = "DROVERTEST_BENCH_STAMP"
	// StampTextEnv, set to 1, starts each body line's text with "t=NS ",
	// the Unix time in nanoseconds at which the line was written.
	StampTextEnv = "DROVERTEST_BENCH_STAMP_TEXT"
	// ChildrenEnv is how many children the fake starts (in its process
	// group) before its first line; its Stamp is written at once then.
	ChildrenEnv = "DROVERTEST_BENCH_CHILDREN"
	// IgnoreTermEnv, set to 1, makes the fake and its children ignore
	// SIGTERM (and the fake SIGPIPE: it hangs instead of exiting when its
	// stdout is closed): only the group's SIGKILL ends them.
	IgnoreTermEnv = "DROVERTEST_BENCH_IGNORE_TERM"
	// PauseEnv is how long the fake waits after the line drover turns
	// into its first event (a Go duration), as a real CLI waits for its
	// model after starting; unset: no pause.
	PauseEnv = "DROVERTEST_BENCH_PAUSE"
	// SoloEnv, set to 1, makes the fake print every line it would print to
	// drover without reading stdin (the `fake | cat` floor).
	SoloEnv = "DROVERTEST_BENCH_SOLO"
	// TagEnv marks every process of one harness, so that anything left
	// behind can be found (and killed) by it.
	TagEnv = "DROVERTEST_BENCH_TAG"
)

// Vendor names, as drover's adapters find them on PATH.
var vendorCommands = []string{"claude", "gemini", "codex"}

// IsFake reports whether this process is to be the fake (FakeMain): it
// runs under a vendor's command name, or RoleEnv is set.
func IsFake() bool {
	return os.Getenv(RoleEnv) != "" || slices.Contains(vendorCommands, filepath.Base(os.Args[0]))
}

// Stamp is what the fake reports about itself, written to StampEnv's file
// when it ends (and, with children, once they run). Times are Unix
// nanoseconds of the machine's wall clock, which the harness shares.
type Stamp struct {
	// Mode is the protocol the fake spoke, chosen from its command line
	// as drover's adapter asked (claude-live, gemini-acp, codex-appserver,
	// or the headless claude, gemini, codex-exec).
	Mode string `json:"mode"`
	// Pid and Pgid are the fake's; Children are its children's pids.
	Pid      int   `json:"pid"`
	Pgid     int   `json:"pgid"`
	Children []int `json:"children,omitempty"`
	// StartNs is when the fake's main began.
	StartNs int64 `json:"startNs"`
	// FirstLineNs is when its first line was written.
	FirstLineNs int64 `json:"firstLineNs"`
	// FirstEventNs is when the line drover turns into its first event (the
	// init) was written: Claude's system init, the answer to ACP's
	// session/new, the answer to Codex's thread/start, the first line of
	// a headless stream.
	FirstEventNs int64 `json:"firstEventNs"`
	// FirstBodyNs and LastBodyNs bound the body lines' writes.
	FirstBodyNs int64 `json:"firstBodyNs"`
	LastBodyNs  int64 `json:"lastBodyNs"`
	// EndNs is when the last line was written.
	EndNs int64 `json:"endNs"`
	// Lines is the number of body lines written, BodyBytes their size
	// with newlines, TotalLines and TotalBytes every line's.
	Lines      int   `json:"lines"`
	BodyBytes  int64 `json:"bodyBytes"`
	TotalLines int   `json:"totalLines"`
	TotalBytes int64 `json:"totalBytes"`
	// MaxRSSKB is the fake's own peak resident set (getrusage), KiB.
	MaxRSSKB int64 `json:"maxRssKb"`
}

// fake is one run of the fake CLI.
type fake struct {
	mode     string
	lines    int
	period   time.Duration // between body lines; 0: unpaced
	pause    time.Duration // after the first event's line
	stampTxt bool
	solo     bool
	stampTo  string
	out      io.Writer
	in       *bufio.Reader
	texts    [][]byte // body texts, JSON-escaped, cycled
	buf      []byte
	st       Stamp

	sid, tid, turn string // session, thread and turn ids
	idBase         uint64
	uuidHead       string
	bodyStart      time.Time
}

// FakeMain runs the fake vendor CLI named name (claude, gemini, codex;
// else the vendor is read from the command line) with args, on the
// process's stdin and stdout, and returns its exit status. It speaks the
// protocol drover's adapter chose through the command line: Claude's
// stream-json (live with --input-format stream-json, else headless), ACP
// for `gemini --acp` (else Gemini's headless stream-json), the JSON-RPC of
// `codex app-server` (else `codex exec --json`). Between the vendor's
// opening lines and its final result it prints the body: LinesEnv text
// lines of the shape (Shape), each one UES event in drover, answers
// requests as the real CLI does, and exits once stdin ends after the
// result (live) or at once (headless).
func FakeMain(name string, args []string) int {
	start := time.Now()
	if os.Getenv(RoleEnv) == "child" {
		return child()
	}
	if slices.Contains(args, "--version") {
		fmt.Println(map[string]string{"claude": "2.1.330 (Claude Code)", "gemini": "0.61.0", "codex": "codex-cli 0.169.0"}[name])
		return 0
	}
	mode, err := fakeMode(name, args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 2
	}
	f, err := newFake(mode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		return 2
	}
	f.st.StartNs = start.UnixNano()
	stubborn := os.Getenv(IgnoreTermEnv) == "1"
	if stubborn {
		signal.Ignore(syscall.SIGTERM, syscall.SIGPIPE)
	}
	if n, _ := strconv.Atoi(os.Getenv(ChildrenEnv)); n > 0 {
		if err := f.startChildren(n); err != nil {
			fmt.Fprintln(os.Stderr, "fake:", err)
			return 1
		}
	}
	if err := f.run(); err != nil {
		fmt.Fprintln(os.Stderr, "fake:", err)
		if stubborn {
			hang()
		}
		return 1
	}
	return 0
}

// fakeMode is the protocol the command line asks of vendor name.
func fakeMode(name string, args []string) (string, error) {
	if !slices.Contains(vendorCommands, name) {
		switch {
		case slices.Contains(args, "-p"):
			name = "claude"
		case slices.Contains(args, "--acp") || slices.Contains(args, "--output-format"):
			name = "gemini"
		case len(args) > 0 && (args[0] == "app-server" || args[0] == "exec"):
			name = "codex"
		default:
			return "", fmt.Errorf("no vendor named %q and none recognised in %q", name, args)
		}
	}
	switch name {
	case "claude":
		if i := slices.Index(args, "--input-format"); i >= 0 && i+1 < len(args) && args[i+1] == "stream-json" {
			return "claude-live", nil
		}
		return "claude", nil
	case "gemini":
		if slices.Contains(args, "--acp") {
			return "gemini-acp", nil
		}
		return "gemini", nil
	}
	if len(args) > 0 && args[0] == "app-server" {
		return "codex-appserver", nil
	}
	return "codex-exec", nil
}

func newFake(mode string) (*fake, error) {
	f := &fake{mode: mode, lines: 1000, out: os.Stdout, stampTo: os.Getenv(StampEnv),
		stampTxt: os.Getenv(StampTextEnv) == "1", solo: os.Getenv(SoloEnv) == "1"}
	if !f.solo {
		f.in = bufio.NewReaderSize(os.Stdin, 64<<10)
	}
	if v := os.Getenv(LinesEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%s=%q: want a count", LinesEnv, v)
		}
		f.lines = n
	}
	if v := os.Getenv(RateEnv); v != "" {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 {
			return nil, fmt.Errorf("%s=%q: want lines per second", RateEnv, v)
		}
		if r > 0 {
			f.period = time.Duration(float64(time.Second) / r)
		}
	}
	if v := os.Getenv(PauseEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", PauseEnv, v, err)
		}
		f.pause = d
	}
	chars := shapeOfMode(mode).TextChars
	if v := os.Getenv(TextEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 2 {
			return nil, fmt.Errorf("%s=%q: want a length of at least 2", TextEnv, v)
		}
		chars = n
	}
	f.texts = textPool(chars)
	r := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))
	f.idBase = r.Uint64()
	f.uuidHead = fmt.Sprintf("%08x-%04x-4%03x-%04x-", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, 0x8000|r.Uint32()&0x3fff)
	f.sid, f.tid, f.turn = f.uuid(1<<40), f.uuid(2<<40), f.uuid(3<<40)
	f.st.Mode, f.st.Pid, f.st.Pgid = mode, os.Getpid(), syscall.Getpgrp()
	return f, nil
}

// child is a fake's child: it waits to be killed by its group's signal.
func child() int {
	if os.Getenv(IgnoreTermEnv) == "1" {
		signal.Ignore(syscall.SIGTERM)
	}
	hang()
	return 0
}

// hang never returns: the process waits to be killed.
func hang() {
	for {
		time.Sleep(time.Hour)
	}
}

// startChildren starts n children in the fake's process group, with no
// stdio of drover's, and writes the stamp so the harness knows them.
func (f *fake) startChildren(n int) error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	for range n {
		c := exec.Command(exe)
		c.Env = append(os.Environ(), RoleEnv+"=child")
		if err := c.Start(); err != nil {
			return fmt.Errorf("start child: %w", err)
		}
		f.st.Children = append(f.st.Children, c.Process.Pid)
		_ = c.Process.Release() // killed with the group; never waited for here
	}
	return f.writeStamp()
}

func (f *fake) run() error {
	var err error
	switch f.mode {
	case "claude-live":
		err = f.claude(true)
	case "claude":
		err = f.claude(false)
	case "gemini-acp":
		err = f.geminiACP()
	case "gemini":
		err = f.geminiHeadless()
	case "codex-appserver":
		err = f.codexAppServer()
	case "codex-exec":
		err = f.codexExec()
	}
	if err != nil {
		return err
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		f.st.MaxRSSKB = ru.Maxrss
	}
	if err := f.writeStamp(); err != nil {
		return err
	}
	if f.in != nil && (f.mode == "claude-live" || f.mode == "gemini-acp" || f.mode == "codex-appserver") {
		// Like the real CLIs in these modes: the work is over, the
		// process exits when its input ends.
		_, _ = io.Copy(io.Discard, f.in)
	}
	return nil
}

func (f *fake) writeStamp() error {
	if f.stampTo == "" {
		return nil
	}
	b, err := json.Marshal(f.st)
	if err != nil {
		return err
	}
	tmp := f.stampTo + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, f.stampTo)
}

// emit writes one line (without its newline) in one write, as the real
// CLIs write their lines. The line's time is taken just before the write.
func (f *fake) emit(line []byte) error {
	line = append(line, '\n')
	now := time.Now().UnixNano()
	if _, err := f.out.Write(line); err != nil {
		return err
	}
	if f.st.FirstLineNs == 0 {
		f.st.FirstLineNs = now
	}
	f.st.EndNs = now
	f.st.TotalLines++
	f.st.TotalBytes += int64(len(line))
	return nil
}

// emitFirst writes the line drover turns into its first event, then
// pauses (PauseEnv).
func (f *fake) emitFirst(line []byte) error {
	if err := f.emit(line); err != nil {
		return err
	}
	f.st.FirstEventNs = f.st.EndNs
	time.Sleep(f.pause)
	return nil
}

// fill replaces the placeholders of a captured line.
func (f *fake) fill(tpl string, kv ...string) []byte {
	cwd, _ := os.Getwd()
	home := os.Getenv("CODEX_HOME")
	if home == "" {
		home = filepath.Join(os.Getenv("HOME"), ".codex")
	}
	pairs := []string{"{{SID}}", f.sid, "{{TID}}", f.tid, "{{TURN}}", f.turn, "{{UUID}}", f.uuid(4 << 40),
		"{{UID}}", f.uuid(5 << 40), "{{CWD}}", jsonString(cwd), "{{CODEXHOME}}", strings.Trim(jsonString(home), `"`),
		"{{S}}", strconv.FormatInt(time.Now().Unix(), 10), "{{PROMPT}}", `"bench"`}
	return []byte(strings.NewReplacer(append(kv, pairs...)...).Replace(tpl))
}

// body prints the body lines, each built by line from the buffer, its
// index and its text.
func (f *fake) body(line func(b []byte, i int, text []byte) []byte) error {
	f.bodyStart = time.Now()
	var text []byte
	for i := range f.lines {
		if f.period > 0 {
			if d := time.Until(f.bodyStart.Add(time.Duration(i) * f.period)); d > 0 {
				time.Sleep(d)
			}
		}
		t := f.texts[i%len(f.texts)]
		if f.stampTxt {
			text = append(append(strconv.AppendInt(append(text[:0], "t="...), time.Now().UnixNano(), 10), ' '), t...)
			t = text
		}
		f.buf = line(f.buf[:0], i, t)
		if err := f.emit(f.buf); err != nil {
			return err
		}
		if i == 0 {
			f.st.FirstBodyNs = f.st.EndNs
		}
		f.st.LastBodyNs = f.st.EndNs
		f.st.Lines++
		f.st.BodyBytes += int64(len(f.buf) + 1)
	}
	return nil
}

// claude prints Claude Code's stream-json: the init, in a live run the
// prompt echoed (--replay-user-messages), the body as assistant messages,
// the result.
func (f *fake) claude(live bool) error {
	prompt := json.RawMessage(`[{"text":"bench","type":"text"}]`)
	if f.in != nil {
		if live {
			line, err := f.in.ReadBytes('\n')
			if err != nil && len(line) == 0 {
				return fmt.Errorf("no user message on stdin: %w", err)
			}
			var m struct {
				Message struct {
					Content json.RawMessage `json:"content"`
				} `json:"message"`
			}
			if json.Unmarshal(line, &m) == nil && len(m.Message.Content) > 0 {
				prompt = m.Message.Content
			}
		} else if _, err := io.Copy(io.Discard, f.in); err != nil {
			return err
		}
	}
	if err := f.emitFirst(f.fill(claudeInit)); err != nil {
		return err
	}
	if live {
		b := append([]byte(`{"type":"user","message":{"role":"user","content":`), prompt...)
		b = append(b, `},"session_id":"`+f.sid+`","parent_tool_use_id":null,"uuid":"`...)
		b = append(append(b, f.uuid(6<<40)...), `","timestamp":"`...)
		b = append(appendTimestamp(b), `","isReplay":true}`...)
		if err := f.emit(b); err != nil {
			return err
		}
	}
	err := f.body(func(b []byte, i int, text []byte) []byte {
		if live {
			b = append(b, `{"type":"assistant","message":{"content":[{"text":"`...)
			b = append(b, text...)
			b = append(b, `","type":"text"}],"id":"msg_`...)
			b = f.appendHex24(b, i)
			b = append(b, `","model":"claude-opus-5-5","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"input_tokens":10,"output_tokens":1},"context_management":null},"parent_tool_use_id":null,"session_id":"`...)
		} else {
			b = append(b, `{"type":"assistant","message":{"id":"msg_`...)
			b = f.appendHex24(b, i)
			b = append(b, `","type":"message","role":"assistant","model":"claude-opus-5-5","content":[{"type":"text","text":"`...)
			b = append(b, text...)
			b = append(b, `"}],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":10,"output_tokens":1},"context_management":null},"parent_tool_use_id":null,"session_id":"`...)
		}
		b = append(b, f.sid...)
		b = append(b, `","uuid":"`...)
		b = f.appendUUID(b, i)
		b = append(b, `","timestamp":"`...)
		b = appendTimestamp(b)
		if live {
			b = append(b, `","request_id":"req_`...)
			b = f.appendHex24(b, i+1<<32)
		}
		return append(b, `"}`...)
	})
	if err != nil {
		return err
	}
	return f.emit(f.fill(claudeResult, "{{RESULT}}", `"bench done"`))
}

// serve reads drover's requests until stdin ends and answers each with
// answer; solo, it answers the script of requests drover would send.
func (f *fake) serve(script []string, answer func(method string, id []byte) (bool, error)) error {
	if f.in == nil {
		for i, m := range script {
			if _, err := answer(m, []byte(strconv.Itoa(i+1))); err != nil {
				return err
			}
		}
		return nil
	}
	for {
		line, err := f.in.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var m jsonrpc.Message
			if json.Unmarshal(line, &m) != nil {
				return fmt.Errorf("undecodable request %q", line)
			}
			if m.Method != "" {
				done, aerr := answer(m.Method, m.ID)
				if aerr != nil {
					return aerr
				}
				if done {
					return nil // the rest of stdin is drained by run
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// unknownMethod answers a request the fake does not serve.
func (f *fake) unknownMethod(method string, id []byte) error {
	if len(id) == 0 {
		return nil
	}
	line := jsonrpc.Codec{}.Error(id, jsonrpc.CodeMethodNotFound, "Method not found: "+method)
	return f.emit(bytes.TrimSuffix(line, []byte("\n")))
}

// geminiACP is `gemini --acp`: initialize, session/new, then the prompt's
// updates (the body as agent_message_chunk) and its answer.
func (f *fake) geminiACP() error {
	return f.serve([]string{"initialize", "session/new", "session/prompt"}, func(method string, id []byte) (bool, error) {
		switch method {
		case "initialize":
			return false, f.emit(f.fill(geminiInitialize, "{{ID}}", string(id)))
		case "session/new":
			return false, f.emitFirst(f.fill(geminiSessionNew, "{{ID}}", string(id)))
		case "session/cancel":
			return false, nil
		case "session/prompt":
			if err := f.emit(f.fill(geminiCommands)); err != nil {
				return false, err
			}
			err := f.body(func(b []byte, _ int, text []byte) []byte {
				b = append(b, `{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"`...)
				b = append(b, f.sid...)
				b = append(b, `","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"`...)
				b = append(b, text...)
				return append(b, `"}}}}`...)
			})
			if err != nil {
				return false, err
			}
			return true, f.emit(f.fill(geminiPromptDone, "{{ID}}", string(id)))
		}
		return false, f.unknownMethod(method, id)
	})
}

// geminiHeadless is `gemini --output-format stream-json`: the prompt on
// stdin, the body as assistant message deltas.
func (f *fake) geminiHeadless() error {
	if f.in != nil {
		if _, err := io.Copy(io.Discard, f.in); err != nil {
			return err
		}
	}
	b := append(appendTimestamp([]byte(`{"type":"init","timestamp":"`)), `","session_id":"`+f.sid+`","model":"gemini-2.5-flash"}`...)
	if err := f.emitFirst(b); err != nil {
		return err
	}
	b = append(appendTimestamp([]byte(`{"type":"message","timestamp":"`)), `","role":"user","content":"bench"}`...)
	if err := f.emit(b); err != nil {
		return err
	}
	err := f.body(func(b []byte, _ int, text []byte) []byte {
		b = appendTimestamp(append(b, `{"type":"message","timestamp":"`...))
		b = append(b, `","role":"assistant","content":"`...)
		b = append(b, text...)
		return append(b, `","delta":true}`...)
	})
	if err != nil {
		return err
	}
	b = append(appendTimestamp([]byte(`{"type":"result","timestamp":"`)), `","status":"success","stats":{"total_tokens":15,"input_tokens":10,"output_tokens":5,"cached":0,"input":10,"duration_ms":116,"tool_calls":0,"models":{"gemini-2.5-flash":{"total_tokens":15,"input_tokens":10,"output_tokens":5,"cached":0,"input":10}}}}`...)
	return f.emit(b)
}

// codexAppServer is `codex app-server`: initialize, thread/start, then
// turn/start's notifications (the body as completed agentMessage items)
// and turn/completed.
func (f *fake) codexAppServer() error {
	return f.serve([]string{"initialize", "thread/start", "turn/start"}, func(method string, id []byte) (bool, error) {
		switch method {
		case "initialize":
			if err := f.emit(withID(f.fill(codexInitialize), id)); err != nil {
				return false, err
			}
			return false, f.emit(f.fill(codexConfigWarning))
		case "initialized":
			return false, nil
		case "thread/start":
			if err := f.emitFirst(withID(f.fill(codexThreadStart), id)); err != nil {
				return false, err
			}
			return false, f.emit(f.fill(codexThreadStarted))
		case "turn/start":
			for _, l := range [][]byte{withID(f.fill(codexTurnStart), id), f.fill(codexTurnStarted), f.fill(codexUserStarted), f.fill(codexUserCompleted)} {
				if err := f.emit(l); err != nil {
					return false, err
				}
			}
			var last []byte
			err := f.body(func(b []byte, i int, text []byte) []byte {
				ms := strconv.AppendInt(nil, time.Now().UnixMilli(), 10)
				b = append(b, `{"method":"item/completed","params":{"item":`...)
				itemStart := len(b)
				b = append(b, `{"type":"agentMessage","moderation":null,"id":"msg_`...)
				b = f.appendHex24(b, i)
				b = append(b, `","text":"`...)
				b = append(b, text...)
				b = append(b, `","phase":null,"memoryCitation":null,"delivery":null,"questions":null,"startedAtMs":`...)
				b = append(append(append(b, ms...), `,"completedAtMs":`...), ms...)
				b = append(b, '}')
				if i == f.lines-1 {
					last = append(last[:0], b[itemStart:]...)
				}
				b = append(b, `,"threadId":"`+f.tid+`","turnId":"`+f.turn+`","contentTokenCount":null,"completedAtMs":`...)
				b = append(append(b, ms...), `},"emittedAtMs":`...)
				return append(append(b, ms...), '}')
			})
			if err != nil {
				return false, err
			}
			if err := f.emit(f.fill(codexTokenUsage)); err != nil {
				return false, err
			}
			return true, f.emit(f.fill(codexTurnCompleted, "{{ITEM}}", string(last)))
		}
		return false, f.unknownMethod(method, id)
	})
}

// codexExec is `codex exec --json`: the prompt on stdin, the body as
// item.completed agent messages.
func (f *fake) codexExec() error {
	if f.in != nil {
		if _, err := io.Copy(io.Discard, f.in); err != nil {
			return err
		}
	}
	if err := f.emitFirst([]byte(`{"type":"thread.started","thread_id":"` + f.tid + `"}`)); err != nil {
		return err
	}
	if err := f.emit([]byte(`{"type":"turn.started"}`)); err != nil {
		return err
	}
	err := f.body(func(b []byte, i int, text []byte) []byte {
		b = strconv.AppendInt(append(b, `{"type":"item.completed","item":{"id":"item_`...), int64(i), 10)
		b = append(b, `","type":"agent_message","text":"`...)
		b = append(b, text...)
		return append(b, `"}}`...)
	})
	if err != nil {
		return err
	}
	return f.emit([]byte(`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"cache_write_input_tokens":0,"output_tokens":5,"reasoning_output_tokens":0}}`))
}

// withID replaces the id of a captured response ({"id":N,…) with id.
func withID(line, id []byte) []byte {
	_, rest, ok := bytes.Cut(line, []byte(","))
	if !ok || !bytes.HasPrefix(line, []byte(`{"id":`)) {
		return line
	}
	return append(append(append([]byte(`{"id":`), id...), ','), rest...)
}

// uuid is a UUID-shaped id, unique per fake and n.
func (f *fake) uuid(n uint64) string { return string(f.appendUUID(nil, int(n))) }

func (f *fake) appendUUID(b []byte, i int) []byte {
	return appendHex(append(b, f.uuidHead...), f.idBase^uint64(i), 12)
}

// appendHex24 appends a 24-digit hex id, unique per fake and i.
func (f *fake) appendHex24(b []byte, i int) []byte {
	return appendHex(appendHex(b, f.idBase>>32, 8), f.idBase+uint64(i)*0x9e3779b97f4a7c15, 16)
}

// appendHex appends the low width hex digits of v, zero-padded.
func appendHex(b []byte, v uint64, width int) []byte {
	const digits = "0123456789abcdef"
	for shift := 4 * (width - 1); shift >= 0; shift -= 4 {
		b = append(b, digits[v>>uint(shift)&0xf])
	}
	return b
}

// appendTimestamp appends the time now as the vendors print it
// (2026-11-25T01:41:45.715Z).
func appendTimestamp(b []byte) []byte {
	return time.Now().UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
}

// jsonString is s as a JSON string.
func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// words make the body texts: the prose and code words of an agent
// explaining a change.
var words = strings.Fields(`the function returns an error when the file is missing so I will add
a check before calling it and update the tests in main_test.go to cover both cases; run go test
./... to verify that nothing else breaks, then look at the handler which reads the request body
twice: once for logging and once for decoding, which fails on large uploads because the reader
is consumed. I changed it to buffer the body with io.ReadAll and limit it to 1 MiB`)

// textPool returns the texts of body lines, JSON-escaped: lengths spread
// evenly around mean characters (half to one and a half times it), some
// with a quoted word or a line break, as an agent's prose has.
func textPool(mean int) [][]byte {
	const n = 101
	r := rand.New(rand.NewPCG(12, 34))
	pool := make([][]byte, 0, n)
	for i := range n {
		want := mean/2 + i*mean/(n-1)
		var s strings.Builder
		for j := 0; s.Len() < want; j++ {
			w := words[r.IntN(len(words))]
			switch {
			case j > 0 && i%7 == 3 && j == 4:
				s.WriteString("\n")
			case j > 0:
				s.WriteString(" ")
			}
			if i%5 == 1 && j == 2 {
				w = `"` + w + `"`
			}
			s.WriteString(w)
		}
		t := s.String()[:want]
		pool = append(pool, []byte(strings.Trim(jsonString(t), `"`)))
	}
	return pool
}
