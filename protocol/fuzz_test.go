package protocol_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/protocol"
)

var fuzzSeeds = []string{
	`{"id":1,"op":"list"}`,
	`{"id":1,"op":"list","status":["running"],"limit":3}`,
	`{"id":"a","op":"get","runId":"run_x"}`,
	`{"id":2,"op":"run","agent":"quick","prompt":"2","options":{"tier":"dry-run","timeout":"5s"}}`,
	`{"id":3,"op":"run","agent":"hang","prompt":"x"}`,
	`{"id":4,"op":"events","runId":"run_x","afterSeq":3}`,
	`{"id":5,"op":"subscribe","all":true}`,
	`{"id":6,"op":"unsubscribe","subscription":"sub_1"}`,
	`{"id":7,"op":"cancel","runId":"run_x"}`,
	`{"id":8,"op":"await","runs":["run_x"]}`,
	`{"id":9,"op":"respond"}`,
	"{\"id\":1,\"op\":\"list\"}\n{\"id\":2,\"op\":\"list\"}",
	`{"id":1e400,"op":"list"}`,
	`{"id":-0,"op":"list"}`,
	"",
	"\x00\xff",
}

// probe is sent after the fuzzed input: its answer proves the connection
// is still up.
const probe = `{"id":"probe","op":"get","runId":"run_probe"}`

// checkLine feeds input (any bytes: several lines, truncated ones) and
// the probe through Serve, and checks that every output line is JSON and
// the probe is answered.
func checkLine(t *testing.T, srv *protocol.Server, input []byte) {
	var out bytes.Buffer
	in := bytes.NewReader(append(append(append([]byte{}, input...), '\n'), probe+"\n"...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := protocol.Serve(ctx, srv, in, &out); err != nil {
		t.Fatalf("Serve(%q): %v", input, err)
	}
	probed := false
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var l struct {
			ID    json.RawMessage `json:"id"`
			Error *api.Error      `json:"error"`
		}
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("input %q: output line is not JSON: %q", input, sc.Bytes())
		}
		if string(l.ID) == `"probe"` {
			probed = l.Error != nil && l.Error.Code == api.CodeNotFound
		}
	}
	if !probed {
		t.Fatalf("input %q: the connection did not answer the probe:\n%s", input, out.String())
	}
}

// FuzzServerLine: random and truncated lines never crash the server or
// drop the connection (PRO-1).
func FuzzServerLine(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	srv := newFixture(f, protocol.Config{ShutdownGrace: 10 * time.Millisecond}).srv
	f.Fuzz(func(t *testing.T, input []byte) { checkLine(t, srv, input) })
}

// TestPRO1_FuzzServerLineQuick runs the fuzz check over the seeds, every
// truncation of them, and random mutations, deterministically.
func TestPRO1_FuzzServerLineQuick(t *testing.T) {
	srv := newFixture(t, protocol.Config{ShutdownGrace: 10 * time.Millisecond}).srv
	var inputs []string
	for _, s := range fuzzSeeds {
		for i := 0; i <= len(s); i += max(1, len(s)/8) {
			inputs = append(inputs, s[:i])
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := `{}[]":,0123456789-eE.tfnul \` + "\n\x00\xff" + `idoprunlistgetawaitcancel`
	for range 150 {
		b := []byte(fuzzSeeds[rng.IntN(len(fuzzSeeds))])
		for range 1 + rng.IntN(4) {
			switch pos := rng.IntN(len(b) + 1); rng.IntN(3) {
			case 0:
				b = append(b[:pos:pos], append([]byte{alphabet[rng.IntN(len(alphabet))]}, b[pos:]...)...)
			case 1:
				if pos < len(b) {
					b = append(b[:pos:pos], b[pos+1:]...)
				}
			default:
				b = b[:pos]
			}
		}
		inputs = append(inputs, string(b))
	}
	inputs = append(inputs, strings.Repeat(`{"id":1,"op":"list"}`, 50), strings.Repeat("{", 5000))
	for _, in := range inputs {
		checkLine(t, srv, []byte(in))
	}
}
