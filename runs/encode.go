package runs

import (
	"bytes"
	"encoding/json"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/drover-run/drover"
)

// slabSize is the largest buffer a slabEncoder carves event JSON from, and
// minSlab the smallest. A run that fills its slabs within slabFast gets
// slabs twice as large, up to slabSize; one that takes longer than
// slabSlow, half as large, down to minSlab: a busy run allocates seldom,
// and a server running 200 slow runs does not hold 64 KiB for each.
const (
	slabSize = 64 << 10
	minSlab  = 4 << 10
	slabFast = 100 * time.Millisecond
	slabSlow = time.Second
)

// slabEncoder encodes events to JSON exactly as json.Marshal does, but
// carves the results out of shared slabs (4-64 KiB) instead of allocating
// each: every allocation brings the next garbage collection nearer, and
// collections slow the agent's event path. A result is never written again
// once returned (a full slab is replaced, not reused), so it may be handed
// to the ledger.
type slabEncoder struct {
	slab []byte
	last int       // where the last Write started in slab
	size int       // the size of the next slab; 0: minSlab
	at   time.Time // when the current slab was started
	enc  *json.Encoder
	// scratch is appendEvent's buffer, reused: the event is then copied
	// into the slab, whose space is known only once it is encoded.
	scratch []byte
	ev      drover.Event // the event being encoded: a pointer to it is no allocation
}

func (e *slabEncoder) encode(ev drover.Event) ([]byte, error) {
	if n := longText(ev); n > collectAbove {
		collectForLongText(n)
	}
	if b, ok := appendEvent(e.scratch[:0], ev); ok {
		if len(b) > slabSize {
			// An event larger than a slab (a long final text) keeps the
			// buffer it was encoded in rather than being copied into a
			// slab of its own, and the encoder does not keep a buffer of
			// that size for the rest of the run.
			e.scratch = nil
			return b[:len(b):len(b)], nil
		}
		e.scratch = b[:0]
		e.Write(b)
		data := e.slab[e.last:]
		return data[:len(data):len(data)], nil
	}
	if p, ok := ev.Payload.(drover.DonePayload); ok && len(p.Result) > slabSize {
		if b, ok := encodeLongDone(ev, p); ok {
			return b, nil
		}
	}
	if e.enc == nil {
		e.enc = json.NewEncoder(e)
	}
	e.ev = ev
	err := e.enc.Encode(&e.ev)
	e.ev = drover.Event{}
	if err != nil {
		return nil, err
	}
	// Encode writes once, the value and a newline.
	data := e.slab[e.last : len(e.slab)-1]
	return data[:len(data):len(data)], nil
}

// collectAbove is the length of an event's text above which the encoder
// may collect garbage and return free memory to the system before
// encoding it (see collectForLongText).
const collectAbove = 1 << 20

// collectForLongText collects garbage and returns free memory to the
// system before an event with a text of n bytes is encoded, if n is at
// least a quarter of the live heap. A text this long was built by growing
// a buffer (an adapter joining a streamed message's chunks, a reader
// joining a long line): the heap has grown by a few times its size, and
// the event's JSON would grow it by its size once more. Collecting first
// kept a 10 MB final text's run 20 MB smaller. The bound keeps
// the cost in proportion: the collector runs anyway each time the heap
// grows by its live size, so such a text costs at most a few collections
// more, and a server with a large heap does not collect for every long
// tool output of its runs.
func collectForLongText(n int) {
	live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(live)
	if live[0].Value.Kind() == metrics.KindUint64 && uint64(n) < live[0].Value.Uint64()/4 {
		return
	}
	debug.FreeOSMemory()
}

// longText is the length of the one string of ev's payload that may be
// long: a message, a thought, a tool's output or a final result.
func longText(ev drover.Event) int {
	switch p := ev.Payload.(type) {
	case drover.TextPayload:
		return len(p.Content)
	case drover.ThinkingPayload:
		return len(p.Summary)
	case drover.ToolResultPayload:
		return len(p.Output)
	case drover.DonePayload:
		return len(p.Result)
	}
	return 0
}

// warmEncoders has encoding/json build its encoder of an event with each
// payload drover defines, once per process. encoding/json builds a type's
// encoder the first time it meets the type: for a run's first event (init,
// which appendEvent leaves to it) that took ~0.6 ms, all of it between the
// vendor's first line and the event. The
// recorder's encoder calls it as it starts, while the vendor is starting.
var warmEncoders = sync.OnceFunc(func() {
	for _, p := range []any{drover.InitPayload{}, drover.ToolUsePayload{Input: map[string]any{}},
		drover.ToolResultPayload{}, drover.PermissionRequestPayload{Input: map[string]any{}}, drover.ErrorPayload{},
		drover.DonePayload{}, drover.PermissionWithdrawnPayload{}, drover.PermissionAnswerPayload{},
		drover.SteerPayload{}, drover.InterruptPayload{}, json.RawMessage(`{}`)} {
		_, _ = json.Marshal(drover.Event{Payload: p, Metadata: map[string]any{}})
	}
})

// nextSize returns the size of a new slab, from how long the last one
// took to fill.
func (e *slabEncoder) nextSize() int {
	now := time.Now()
	switch took := now.Sub(e.at); {
	case e.size == 0:
		e.size = minSlab
	case took < slabFast:
		e.size = min(2*e.size, slabSize)
	case took > slabSlow:
		e.size = max(e.size/2, minSlab)
	}
	e.at = now
	return e.size
}

// payloadStatus is how a done event's JSON begins its payload.
var payloadStatus = []byte(`,"payload":{"status":"`)

// encodeLongDone encodes a done event whose result (the run's final text)
// is larger than a slab: encoding/json writes the event without its
// result, and the result is written into that, after the status, by
// appendString, in a buffer of its final size. encoding/json grows its
// buffer by a quarter at a time and its output was then copied, which
// for a 10 MB result held several copies at once. The bytes
// are encoding/json's. ok is false when the event's JSON is not as
// expected (the caller encodes it whole then).
func encodeLongDone(ev drover.Event, p drover.DonePayload) (_ []byte, ok bool) {
	result := p.Result
	p.Result = ""
	ev.Payload = p
	head, err := json.Marshal(ev)
	if err != nil {
		return nil, false
	}
	// Keys are written escaped within strings, so the first match is the
	// payload's own key; a status needing escapes is left to the caller.
	i := bytes.Index(head, payloadStatus)
	if i < 0 {
		return nil, false
	}
	i += len(payloadStatus)
	n := bytes.IndexByte(head[i:], '"')
	if n < 0 || bytes.IndexByte(head[i:i+n], '\\') >= 0 {
		return nil, false
	}
	i += n + 1
	out := make([]byte, 0, len(head)+len(`,"result":`)+len(result)+len(result)/16+2)
	out = append(out, head[:i]...)
	out = append(out, `,"result":`...)
	out = appendString(out, result)
	out = append(out, head[i:]...)
	return out[:len(out):len(out)], true
}

// Write appends p to the current slab, starting a new slab when p does not
// fit (a value larger than a slab gets a slab of its own).
func (e *slabEncoder) Write(p []byte) (int, error) {
	if len(e.slab)+len(p) > cap(e.slab) {
		e.slab = make([]byte, 0, max(e.nextSize(), len(p)))
	}
	e.last = len(e.slab)
	e.slab = append(e.slab, p...)
	return len(p), nil
}

// appendEvent appends ev's JSON to b exactly as encoding/json writes it, by
// hand, for the events that make up nearly all of a run: a text,
// text_delta or thinking payload (or none) and metadata of strings only.
// ok is false for any other event (b is then unchanged), which the caller
// encodes with encoding/json. Reflection over Event and its payload cost
// as much as the rest of recording.
func appendEvent(b []byte, ev drover.Event) (_ []byte, ok bool) {
	var key, val string
	switch p := ev.Payload.(type) {
	case nil:
	case drover.TextPayload:
		key, val = "content", p.Content
	case drover.TextDeltaPayload:
		key, val = "delta", p.Delta
	case drover.ThinkingPayload:
		key, val = "summary", p.Summary
	default:
		return b, false
	}
	for _, v := range ev.Metadata {
		if _, isString := v.(string); !isString {
			return b, false
		}
	}
	b = append(b, `{"type":`...)
	b = appendString(b, string(ev.Type))
	b = append(b, `,"agent":`...)
	b = appendString(b, ev.Agent)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, ev.Timestamp, 10)
	b = append(b, `,"sessionId":`...)
	b = appendString(b, ev.SessionID)
	if key != "" {
		b = append(b, `,"payload":{"`...)
		b = append(b, key...)
		b = append(b, `":`...)
		b = appendString(b, val)
		b = append(b, '}')
	}
	if len(ev.Metadata) > 0 {
		b = append(b, `,"metadata":{`...)
		var keys [8]string
		ks := keys[:0]
		for k := range ev.Metadata {
			ks = append(ks, k)
		}
		slices.Sort(ks)
		for i, k := range ks {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, ev.Metadata[k].(string))
		}
		b = append(b, '}')
	}
	if ev.RunID != "" {
		b = append(b, `,"runId":`...)
		b = appendString(b, ev.RunID)
	}
	if ev.Seq != 0 {
		b = append(b, `,"seq":`...)
		b = strconv.AppendInt(b, ev.Seq, 10)
	}
	return append(b, '}'), true
}

const hexDigits = "0123456789abcdef"

// exactAbove is the length of a string above which appendString measures
// its escaped form before growing the buffer: growing by len(s) and then
// again for the escapes copied a 10 MB final text's JSON once more, and
// held both copies at once.
const exactAbove = 64 << 10

// escapedLen is the length of s as appendString writes it, quotes aside.
func escapedLen(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case plain[c]:
			n++
			i++
		case c < utf8.RuneSelf:
			switch c {
			case '\\', '"', '\b', '\f', '\n', '\r', '\t':
				n += 2
			default:
				n += 6
			}
			i++
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			switch {
			case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
				n += 6
			default:
				n += size
			}
			i += size
		}
	}
	return n
}

// plain holds the bytes appendString copies as they are: ASCII but for
// control characters, '"', '\\' and the HTML characters. One load per byte
// instead of six comparisons: text is most of what drover encodes.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&'
	}
	return t
}()

// appendString appends s as a JSON string exactly as encoding/json does
// with HTML escaping (its default): <, > and & as \u003c, \u003e, \u0026,
// control characters as \b, \f, \n, \r, \t or \u00XX, invalid UTF-8 as
// \ufffd, U+2028 and U+2029 escaped.
func appendString(b []byte, s string) []byte {
	n := len(s)
	if n > exactAbove {
		n = escapedLen(s)
	}
	b = slices.Grow(b, n+2) // a long string at once, not by doubling
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
