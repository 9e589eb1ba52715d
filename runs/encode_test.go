package runs

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
)

// The slab encoder gives json.Marshal's bytes, and never changes bytes it
// has returned, across slab boundaries and for values larger than a slab.
func TestSlabEncoder(t *testing.T) {
	var e slabEncoder
	type out struct{ got, want []byte }
	var outs []out
	for i := range 2000 {
		content := strings.Repeat("é<&>\"", i%50)
		if i%700 == 0 {
			content = strings.Repeat("x", slabSize+i)
		}
		ev := drover.Event{Type: drover.TypeText, Agent: "a", Seq: int64(i), Payload: drover.TextPayload{Content: content}}
		got, err := e.encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		outs = append(outs, out{got, want})
	}
	for i, o := range outs {
		if !bytes.Equal(o.got, o.want) {
			t.Fatalf("event %d: got %.80s, want %.80s", i, o.got, o.want)
		}
	}
	if _, err := e.encode(drover.Event{Payload: func() {}}); err == nil {
		t.Error("encoding a func succeeded")
	}
}

// appendEvent writes exactly encoding/json's bytes for the events it takes
// (every byte value, invalid UTF-8, U+2028/9, HTML characters, metadata
// keys in any order, omitted fields), and declines every other event.
func TestAppendEventMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "é", "<", ">", "&", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"\u2028", "\u2029", "\xff", "\xe2\x82", "😀", "\u00a0", "/", "'", " "}
	str := func() string {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	for i := range 5000 {
		ev := drover.Event{Type: drover.EventType(str()), Agent: str(), Timestamp: rng.Int64N(1 << 42), SessionID: str()}
		switch i % 4 {
		case 0:
			ev.Payload = drover.TextPayload{Content: str()}
		case 1:
			ev.Payload = drover.TextDeltaPayload{Delta: str()}
		case 2:
			ev.Payload = drover.ThinkingPayload{Summary: str()}
		}
		if i%3 == 0 {
			ev.Metadata = map[string]any{}
			for range rng.IntN(4) {
				ev.Metadata[str()] = str()
			}
		}
		if i%5 != 0 {
			ev.RunID, ev.Seq = str(), rng.Int64N(100000)
		}
		got, ok := appendEvent(nil, ev)
		if !ok {
			t.Fatalf("event %d declined: %+v", i, ev)
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("event %d:\n got %s\nwant %s", i, got, want)
		}
	}
	for _, ev := range []drover.Event{
		{Type: drover.TypeToolUse, Payload: drover.ToolUsePayload{ToolName: "Bash"}},
		{Type: drover.TypeText, Payload: drover.TextPayload{Content: "x"}, Metadata: map[string]any{"n": 1}},
		{Type: drover.TypeText, Payload: &drover.TextPayload{Content: "x"}},
	} {
		if b, ok := appendEvent([]byte("keep"), ev); ok || string(b) != "keep" {
			t.Errorf("%+v: ok %v, %q", ev, ok, b)
		}
	}
}

// A done event with a result larger than a slab is encoded with
// json.Marshal's bytes, whatever its status, usage, metadata and result
// characters; a status that needs escaping is encoded whole instead.
func TestLongDoneMatchesEncodingJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	alphabet := []string{"a", "é", "<", ">", "&", "\"", "\\", "\n", "\x00", "\u2028", "\xff", "😀", `,"payload":{"status":"`}
	long := func() string {
		var sb strings.Builder
		for sb.Len() <= slabSize {
			sb.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		return sb.String()
	}
	cost, turns := 0.25, int64(3)
	var e slabEncoder
	for i, status := range []drover.DoneStatus{drover.StatusSuccess, drover.StatusError, drover.StatusMaxBudget, `odd "status"`, `back\slash`, ""} {
		ev := drover.Event{Type: drover.TypeDone, Agent: `a","payload":{"status":"x`, Timestamp: 1, SessionID: "s", RunID: "r", Seq: int64(i + 1),
			Payload: drover.DonePayload{Status: status, Result: long(), ResumeToken: "tok",
				Usage: drover.Usage{InputTokens: 5, OutputTokens: 6, TotalCostUSD: &cost, Turns: &turns}, DurationMs: 42}}
		if i%2 == 0 {
			ev.Metadata = map[string]any{"attempts": []any{map[string]any{"agent": "x"}}, "stopReason": "end_turn"}
		}
		want, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("status %q: got %.120s…, want %.120s…", status, got, want)
		}
		_, ok := encodeLongDone(ev, ev.Payload.(drover.DonePayload))
		if escaped := strings.ContainsAny(string(status), `"\`); ok == escaped {
			t.Errorf("status %q: encoded by hand %v", status, ok)
		}
	}
}

// A run that fills its slabs fast gets larger ones, up to slabSize; a
// slow one smaller ones, down to minSlab.
func TestSlabSizeFollowsTheRunsPace(t *testing.T) {
	var e slabEncoder
	var got []int
	for range 6 {
		got = append(got, e.nextSize()) // back to back: fast
	}
	for range 6 {
		e.at = time.Now().Add(-2 * slabSlow)
		got = append(got, e.nextSize())
	}
	e.at = time.Now().Add(-(slabFast + slabSlow) / 2) // neither: kept
	got = append(got, e.nextSize())
	want := []int{minSlab, 2 * minSlab, 4 * minSlab, 8 * minSlab, slabSize, slabSize,
		slabSize / 2, slabSize / 4, slabSize / 8, minSlab, minSlab, minSlab, minSlab}
	if !slices.Equal(got, want) {
		t.Errorf("slab sizes %v, want %v", got, want)
	}
}

// BenchmarkAppendString encodes streamed text as JSON strings (mostly
// plain ASCII, some escapes and UTF-8), the bulk of what drover encodes.
func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat(`The quick brown fox jumps over the lazy dog; "quoted" <b>é</b>`+"\n", 20)
	buf := make([]byte, 0, 4*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = appendString(buf[:0], s)
	}
}

// A string longer than exactAbove is encoded into one buffer of its
// escaped length (each kind of escape counted right), not grown a second
// time for its escapes: a 10 MB final text's JSON was held twice while it
// was copied.
func TestPERF2_LongStringEncodedInOneBuffer(t *testing.T) {
	pieces := []string{"a", "é", "<", ">", "&", "\"", "\\", "\n", "\r", "\t", "\b", "\f", "\x00", "\x1f", "\x7f",
		"\u2028", "\u2029", "\xff", "\xe2\x82", "😀", " "}
	for _, p := range pieces {
		s := strings.Repeat("a"+p, 40_000)
		if len(s) <= exactAbove {
			t.Fatalf("%d bytes: not long", len(s))
		}
		want, _ := json.Marshal(s)
		b := appendString(nil, s)
		if !bytes.Equal(b, want) {
			t.Fatalf("%q: JSON differs from encoding/json's", p)
		}
		if n := escapedLen(s); n != len(want)-2 {
			t.Errorf("%q: escapedLen %d, escaped %d", p, n, len(want)-2)
		}
		// One allocation of the escaped length, rounded up to the runtime's
		// pages; growing again would have added a quarter.
		if spare := cap(b) - len(b); spare >= 8<<10 {
			t.Errorf("%q: %d bytes spare after %d: the buffer grew twice", p, spare, len(b))
		}
	}
}

// An event whose text is longer than collectAbove, and at least a quarter
// of the live heap, is encoded after a collection that returns the garbage
// of the text's growth to the system; a short one, or one small
// beside a large live heap, is not.
func TestPERF2_LongTextCollectedBeforeEncoding(t *testing.T) {
	forced := []metrics.Sample{{Name: "/gc/cycles/forced:gc-cycles"}}
	count := func() uint64 {
		metrics.Read(forced)
		return forced[0].Value.Uint64()
	}
	encode := func(ev drover.Event) (collected bool) {
		t.Helper()
		var e slabEncoder
		runtime.GC() // the live heap: long and the test, not the last case's JSON
		before := count()
		b, err := e.encode(ev)
		if err != nil {
			t.Fatal(err)
		}
		collected = count() > before
		if want, _ := json.Marshal(ev); !bytes.Equal(b, want) {
			t.Errorf("%s: JSON differs from encoding/json's", ev.Type)
		}
		return collected
	}
	long := strings.Repeat("x", 8<<20)
	for _, c := range []struct {
		ev      drover.Event
		collect bool
	}{
		{drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: "short"}}, false},
		{drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: long}}, true},
		{drover.Event{Type: drover.TypeThinking, Payload: drover.ThinkingPayload{Summary: long}}, true},
		{drover.Event{Type: drover.TypeToolResult, Payload: drover.ToolResultPayload{Output: long}}, true},
		{drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, Result: long}}, true},
		{drover.Event{Type: drover.TypeDone, Payload: drover.DonePayload{Status: drover.StatusSuccess, Result: long[:collectAbove]}}, false},
	} {
		if got := encode(c.ev); got != c.collect {
			t.Errorf("%s of %d bytes: collected first %v, want %v", c.ev.Type, longText(c.ev), got, c.collect)
		}
	}
	// Beside a live heap more than four times its size, a long text does
	// not bring a collection.
	ballast := make([]byte, 256<<20)
	if encode(drover.Event{Type: drover.TypeText, Payload: drover.TextPayload{Content: long[:collectAbove+1]}}) {
		t.Error("a 1 MB text beside a 256 MB live heap brought a collection")
	}
	runtime.KeepAlive(ballast)
}
