//go:build unix

package runner

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/drover-run/drover"
)

const benchLines = 100_000

// countingTranslator is the cheapest translator: one prebuilt event per
// line and a done at the result, so a benchmark measures the runner.
type countingTranslator struct {
	ev       drover.Event
	done     bool
	finished bool
}

func (c *countingTranslator) Translate(line []byte) ([]drover.Event, error) {
	if bytes.Contains(line, []byte(`"type":"result"`)) {
		c.finished = true
		return nil, nil
	}
	return []drover.Event{c.ev}, nil
}

func (c *countingTranslator) Finished() bool { return c.finished }

func (c *countingTranslator) Finish(Exit) ([]drover.Event, bool) {
	if !c.finished {
		return nil, false
	}
	return []drover.Event{{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess}}}, false
}

// benchHooks prepare the "bench" fake with a countingTranslator.
type benchHooks struct{ Base }

func (h *benchHooks) Capabilities() drover.Capabilities {
	return drover.Capabilities{Tiers: drover.Tiers()}
}

func (h *benchHooks) Prepare(req drover.Request) (*Launch, error) {
	env := append(os.Environ(), fakeAgentEnv+"=bench", fakeArgEnv+"="+strconv.Itoa(benchLines))
	return &Launch{Env: env, Stdin: req.Prompt, Translator: &countingTranslator{ev: drover.Event{Type: drover.TypeText,
		Payload: drover.TextPayload{Content: "x"}}}}, nil
}

// BenchmarkRunOneShot measures Base.Run's one-shot path end to end (the hot
// path of every run nobody steers): a fake CLI prints benchLines ~500-byte
// lines and a result; every line is translated and yielded.
func BenchmarkRunOneShot(b *testing.B) {
	exe, err := os.Executable()
	if err != nil {
		b.Fatal(err)
	}
	a := New(&benchHooks{}, Spec{ID: "bench", Command: "bench", Linger: time.Minute})
	b.SetBytes(int64(benchLines) * 500)
	for b.Loop() {
		n, done := 0, false
		for ev, err := range a.Run(context.Background(), drover.Request{Prompt: "go", Options: drover.Options{Binary: exe}}) {
			if err != nil {
				b.Fatal(err)
			}
			n++
			done = ev.Type == drover.TypeDone
		}
		if n != benchLines+1 || !done {
			b.Fatalf("%d events, done %v", n, done)
		}
	}
}
