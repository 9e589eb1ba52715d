package uestest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// Session is the session id of every replayed event (see Stamp).
const Session = "golden-session"

// Clock is the clock of every replay, so that goldens are reproducible: it
// always returns the same instant, 1700000000000 Unix milliseconds.
func Clock() time.Time { return time.UnixMilli(1700000000000) }

// Stamp is the Stamp of agent's replayed events: Session and Clock.
func Stamp(agent string) runner.Stamp {
	return runner.Stamp{Agent: agent, SessionID: Session, Now: Clock}
}

// Capture is one native stream captured from a real vendor CLI, in the
// testdata of the vendor's package: testdata/<version>/<name>.jsonl, with
// <name>.meta.json beside it when the capture driver recorded how the
// process ended. Other files may share the prefix (<name>.golden, Codex's
// <name>.rollout.jsonl).
type Capture struct {
	// Name is the case name ("err_429").
	Name string
	// Path is the files' common prefix ("testdata/0.61.0/err_429").
	Path string
	// Meta is <name>.meta.json; zero when there is none.
	Meta Meta
}

// Meta is what a capture's .meta.json records. The fields every vendor's
// driver writes are decoded here; Decode reads the vendor's own.
type Meta struct {
	// Args are the CLI's arguments.
	Args []string `json:"args"`
	// RC is the exit code.
	RC int `json:"rc"`
	// Signal, when set, says the process was stopped by a signal.
	Signal string `json:"signal"`
	// Stderr is what the process wrote to stderr.
	Stderr string `json:"stderr"`

	raw []byte
}

// Exit is the recorded end of the process as proc reports it: a signal
// makes it Stopped with code -1.
func (m Meta) Exit() runner.Exit {
	e := runner.Exit{Code: m.RC, Signal: m.Signal, Stopped: m.Signal != "", StderrTail: m.Stderr}
	if m.Signal != "" {
		e.Code = -1
	}
	return e
}

// Decode decodes the whole .meta.json into v, for fields of the vendor's
// own; it is an error when the capture has none.
func (m Meta) Decode(v any) error {
	if m.raw == nil {
		return errors.New("capture has no .meta.json")
	}
	return json.Unmarshal(m.raw, v)
}

// Load reads the capture at path (without ".jsonl"), failing t when its
// stream is missing or its metadata does not decode.
func Load(t testing.TB, path string) Capture {
	t.Helper()
	if _, err := os.Stat(path + ".jsonl"); err != nil {
		t.Fatalf("capture missing: %v", err)
	}
	c := Capture{Name: filepath.Base(path), Path: path}
	raw, err := os.ReadFile(path + ".meta.json")
	if errors.Is(err, os.ErrNotExist) {
		return c
	} else if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &c.Meta); err != nil {
		t.Fatalf("%s.meta.json: %v", path, err)
	}
	c.Meta.raw = raw
	return c
}

// Captures loads every capture under testdata/*/ of the package under
// test, failing t when there is none.
func Captures(t testing.TB) []Capture {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join("testdata", "*", "*.jsonl"))
	var out []Capture
	for _, f := range files {
		path := strings.TrimSuffix(f, ".jsonl")
		if strings.Contains(filepath.Base(path), ".") {
			continue // a companion file such as <name>.rollout.jsonl
		}
		out = append(out, Load(t, path))
	}
	if len(out) == 0 {
		t.Fatal("no captured streams in testdata")
	}
	return out
}

// Lines returns every non-blank line of the capture's stream.
func (c Capture) Lines(t testing.TB) [][]byte {
	t.Helper()
	data, err := os.ReadFile(c.Path + ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if len(bytes.TrimSpace(sc.Bytes())) > 0 {
			out = append(out, slices.Clone(sc.Bytes()))
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("%s.jsonl: %v", c.Path, err)
	}
	return out
}

// Replayer replays one vendor's captures through its translator the way the
// runner drives it: every line through Translate, then Finish with the
// recorded exit.
type Replayer struct {
	// Agent is the adapter id.
	Agent string
	// New returns a fresh translator for capture c, configured as the
	// capture was run, that stamps its events with s. It may fail t when
	// c's metadata does not fit.
	New func(t testing.TB, c Capture, s runner.Stamp) runner.Translator
}

// Replay returns the events of capture c, stamped by Stamp(r.Agent), and
// whether Finish reported a rejected resume. A line the translator
// cannot decode fails t: captured lines are all meant to be understood.
func (r Replayer) Replay(t testing.TB, c Capture) (evs []drover.Event, rejected bool) {
	t.Helper()
	tr := r.New(t, c, Stamp(r.Agent))
	for _, l := range c.Lines(t) {
		out, err := tr.Translate(l)
		if err != nil {
			t.Fatalf("%s: %v", c.Path, err)
		}
		evs = append(evs, out...)
	}
	final, rejected := tr.Finish(c.Meta.Exit())
	return append(evs, final...), rejected
}

// Golden checks every capture's replay against its <name>.golden with
// CheckGolden (rewriting the golden first when update is set; never do that
// to make a test pass) and every replayed event with drover.ValidateEvent.
func (r Replayer) Golden(t *testing.T, update bool) {
	for _, c := range Captures(t) {
		t.Run(c.Path, func(t *testing.T) {
			evs, _ := r.Replay(t, c)
			CheckGolden(t, c.Path+".golden", evs, update)
			for _, ev := range evs {
				if err := drover.ValidateEvent(ev); err != nil {
					t.Errorf("invalid event %+v: %v", ev, err)
				}
			}
		})
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
