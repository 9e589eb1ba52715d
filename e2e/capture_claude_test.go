package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/drover-run/drover"
)

// captureEnv names the directory the interactive Claude tests write their
// native streams to, for the adapter's golden tests, when it is set:
//
//	DROVER_E2E=1 DROVER_CLAUDE_CAPTURE=$PWD/../adapter/claude/testdata/2.1.330 go test -run 'Claude' ./e2e
//	(cd ../adapter/claude && go test -run TestADP2_Golden -update)
//
// Each captured run goes through claudetap, which records what drover
// wrote to the real claude and what claude printed, in order.
const captureEnv = "DROVER_CLAUDE_CAPTURE"

var (
	tapOnce sync.Once
	tapBin  string
	tapErr  error
)

// tap makes run o of w go through claudetap when captureEnv is set, and
// returns the function that writes the capture name from the run's events;
// without captureEnv it changes nothing.
func (w *world) tap(name string, o *runOpts) (save func(evs []drover.Event)) {
	dir := os.Getenv(captureEnv)
	if dir == "" {
		return func([]drover.Event) {}
	}
	tapOnce.Do(func() {
		tapBin = filepath.Join(os.TempDir(), fmt.Sprintf("claudetap-%d", os.Getpid()))
		if out, err := exec.Command("go", "build", "-o", tapBin, "./claudetap").CombinedOutput(); err != nil {
			tapErr = fmt.Errorf("build claudetap: %v\n%s", err, out)
		}
	})
	if tapErr != nil {
		w.t.Fatal(tapErr)
	}
	record := filepath.Join(w.t.TempDir(), "tap.jsonl")
	env := map[string]string{"DROVERTEST_TAP_CLI": w.bin, "DROVERTEST_TAP_OUT": record}
	for k, v := range o.Env {
		env[k] = v
	}
	o.Env, o.Binary = env, tapBin
	return func(evs []drover.Event) { w.saveCapture(filepath.Join(dir, name), record, evs) }
}

// liveMeta is what a live capture's .meta.json holds beyond uestest.Meta:
// what drover wrote (stdin, its first line the prompt), the inputs it
// passed on with the number of stdout lines printed before each was
// written, and after how many lines stdin was closed.
type liveMeta struct {
	Args        []string          `json:"args"`
	Env         map[string]string `json:"env"`
	RC          int               `json:"rc"`
	Signal      string            `json:"signal,omitempty"`
	Stderr      string            `json:"stderr"`
	Stdin       []string          `json:"stdin"`
	Inputs      []capturedInput   `json:"inputs"`
	ClosedAfter int               `json:"stdinClosedAfterLine"`
}

type capturedInput struct {
	AfterLine int                             `json:"afterLine"`
	Answer    *drover.PermissionAnswerPayload `json:"answer,omitempty"`
	Steer     *drover.SteerPayload            `json:"steer,omitempty"`
	Interrupt *drover.InterruptPayload        `json:"interrupt,omitempty"`
}

// saveCapture turns claudetap's record into path.jsonl (what claude
// printed) and path.meta.json, scrubbed of this machine's paths and port.
// The inputs are the run's input events in order, less the answers the
// engine gave at the run's end (those were never passed on); each is the
// next line drover wrote after the prompt.
func (w *world) saveCapture(path, record string, evs []drover.Event) {
	w.t.Helper()
	f, err := os.Open(record)
	if err != nil {
		w.t.Fatal(err)
	}
	defer f.Close()
	u, _ := url.Parse(w.url)
	scrub := strings.NewReplacer(w.cwd, "/ws", w.home, "/home", strings.ReplaceAll(w.cwd, "/", "-"), "-ws",
		u.Host, "127.0.0.1:PORT").Replace
	var (
		lines []string
		meta  liveMeta
		after []int
	)
	meta.ClosedAfter = -1
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var r struct {
			Args   []string          `json:"args"`
			Env    map[string]string `json:"env"`
			Sent   *string           `json:"sent"`
			Closed bool              `json:"closed"`
			Line   *string           `json:"line"`
			Exit   *int              `json:"exit"`
			Signal string            `json:"signal"`
			Stderr string            `json:"stderr"`
		}
		if err := json.Unmarshal([]byte(scrub(sc.Text())), &r); err != nil {
			w.t.Fatal(err)
		}
		switch {
		case r.Args != nil:
			meta.Args, meta.Env = r.Args, r.Env
		case r.Sent != nil:
			meta.Stdin = append(meta.Stdin, *r.Sent)
			after = append(after, len(lines))
		case r.Closed:
			meta.ClosedAfter = len(lines)
		case r.Line != nil:
			lines = append(lines, *r.Line)
		case r.Exit != nil:
			meta.RC, meta.Signal, meta.Stderr = *r.Exit, r.Signal, r.Stderr
		}
	}
	for _, ev := range evs {
		in := capturedInput{}
		switch p := ev.Payload.(type) {
		case drover.PermissionAnswerPayload:
			if p.By == drover.ByRunEnd {
				continue
			}
			in.Answer = &p
		case drover.SteerPayload:
			in.Steer = &p
		case drover.InterruptPayload:
			in.Interrupt = &p
		default:
			continue
		}
		meta.Inputs = append(meta.Inputs, in)
	}
	if len(meta.Inputs) != len(meta.Stdin)-1 {
		w.t.Fatalf("capture %s: %d inputs passed on, %d lines written after the prompt", path, len(meta.Inputs), len(meta.Stdin)-1)
	}
	for i := range meta.Inputs {
		meta.Inputs[i].AfterLine = after[i+1]
	}
	m, err := json.MarshalIndent(meta, "", "  ")
	if err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path+".jsonl", []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		w.t.Fatal(err)
	}
	if err := os.WriteFile(path+".meta.json", append(m, '\n'), 0o644); err != nil {
		w.t.Fatal(err)
	}
	w.t.Logf("captured %s: %d lines, %d inputs", path, len(lines), len(meta.Inputs))
}
