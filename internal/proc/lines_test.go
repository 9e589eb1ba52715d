package proc

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/iotest"
)

type scanned struct {
	line    string
	tooLong int64 // Size of a *LineTooLongError; 0 if none
	err     error // any other error
}

func scanAll(r io.Reader, bufSize, limit int) ([]scanned, int64) {
	var skipped atomic.Int64
	var out []scanned
	scanLines(r, bufSize, limit, &skipped, func(line []byte, err error) bool {
		var tl *LineTooLongError
		switch {
		case errors.As(err, &tl):
			if tl.Limit != limit {
				panic(fmt.Sprintf("Limit = %d, want %d", tl.Limit, limit))
			}
			out = append(out, scanned{tooLong: tl.Size})
		case err != nil:
			out = append(out, scanned{err: err})
		default:
			out = append(out, scanned{line: string(line)})
		}
		return true
	})
	return out, skipped.Load()
}

func TestScanLines(t *testing.T) {
	long := `{"k":"` + strings.Repeat("y", 200) + `"}` // 208 bytes
	tests := []struct {
		name    string
		in      string
		limit   int
		want    []scanned
		skipped int64
	}{
		{"empty", "", 100, nil, 0},
		{"blank lines", "\n\r\n  \n", 100, nil, 3},
		{"json and garbage", "hello\n{}\n[1]\n\t{\"a\":1}\r\nbye", 100,
			[]scanned{{line: "{}"}, {line: "\t{\"a\":1}"}}, 3},
		{"final line without newline", "{}\n{\"last\":true}", 100,
			[]scanned{{line: "{}"}, {line: `{"last":true}`}}, 0},
		{"long line spanning buffers", long + "\n", 1000, []scanned{{line: long}}, 0},
		{"exactly at limit", long + "\n", len(long), []scanned{{line: long}}, 0},
		{"at limit with CRLF", long + "\r\n", len(long), []scanned{{line: long}}, 0},
		{"one over limit", long + "\n", len(long) - 1, []scanned{{tooLong: int64(len(long))}}, 0},
		{"oversize between good lines", "{\"a\":1}\n" + long + "\n{\"b\":2}\n", 50,
			[]scanned{{line: `{"a":1}`}, {tooLong: int64(len(long))}, {line: `{"b":2}`}}, 0},
		{"two oversize in a row", long + "\n" + long + "\n{}\n", 50,
			[]scanned{{tooLong: int64(len(long))}, {tooLong: int64(len(long))}, {line: "{}"}}, 0},
		{"oversize at EOF", "{}\n" + long, 50, []scanned{{line: "{}"}, {tooLong: int64(len(long))}}, 0},
		{"oversize non-JSON is still reported", strings.Repeat("z", 300) + "\n{}\n", 50,
			[]scanned{{tooLong: 300}, {line: "{}"}}, 0},
	}
	readers := map[string]func(string) io.Reader{
		"plain":   func(s string) io.Reader { return strings.NewReader(s) },
		"onebyte": func(s string) io.Reader { return iotest.OneByteReader(strings.NewReader(s)) },
		"half":    func(s string) io.Reader { return iotest.HalfReader(strings.NewReader(s)) },
	}
	for _, tt := range tests {
		for rname, mk := range readers {
			for _, bufSize := range []int{16, 64, readBufSize} {
				t.Run(fmt.Sprintf("%s/%s/%d", tt.name, rname, bufSize), func(t *testing.T) {
					got, skipped := scanAll(mk(tt.in), bufSize, tt.limit)
					if fmt.Sprint(got) != fmt.Sprint(tt.want) {
						t.Errorf("got  %v\nwant %v", got, tt.want)
					}
					if skipped != tt.skipped {
						t.Errorf("skipped = %d, want %d", skipped, tt.skipped)
					}
				})
			}
		}
	}
}

func TestScanLinesEarlyBreak(t *testing.T) {
	var skipped atomic.Int64
	calls := 0
	scanLines(strings.NewReader("{}\n{}\n{}\n"), 16, 100, &skipped, func([]byte, error) bool {
		calls++
		return false
	})
	if calls != 1 {
		t.Errorf("yield called %d times after returning false", calls)
	}
}

func TestScanLinesReadError(t *testing.T) {
	boom := errors.New("boom")
	r := io.MultiReader(strings.NewReader("{}\n{\"partial\""), iotest.ErrReader(boom))
	got, _ := scanAll(r, 16, 100)
	if len(got) != 2 || got[0].line != "{}" || !errors.Is(got[1].err, boom) {
		t.Errorf("got %v, want the line, then the error once", got)
	}
	// A read end closed under the reader (drain timeout, Close) ends quietly.
	r = io.MultiReader(strings.NewReader("{}\n"), iotest.ErrReader(fmt.Errorf("read |0: %w", os.ErrClosed)))
	if got, _ := scanAll(r, 16, 100); len(got) != 1 || got[0].line != "{}" {
		t.Errorf("closed: got %v, want just the line", got)
	}
	r = io.MultiReader(strings.NewReader("{}\n"), iotest.ErrReader(syscall.EIO))
	if got, _ := scanAll(r, 16, 100); len(got) != 2 || !errors.Is(got[1].err, syscall.EIO) {
		t.Errorf("EIO: got %v", got)
	}
}

func TestLineTooLongErrorMessage(t *testing.T) {
	msg := (&LineTooLongError{Size: 3 << 20, Limit: 1 << 20}).Error()
	if !strings.Contains(msg, "3145728") || !strings.Contains(msg, "1048576") {
		t.Errorf("message %q lacks the sizes", msg)
	}
}

func TestTailBuffer(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, limit := range []int{1, 7, 64, 1000} {
		tb := newTailBuffer(limit)
		var all []byte
		for i := range 500 {
			chunk := make([]byte, rng.IntN(3*limit+2))
			for j := range chunk {
				chunk[j] = byte(rng.IntN(256))
			}
			if n, err := tb.Write(chunk); n != len(chunk) || err != nil {
				t.Fatalf("Write = %d, %v", n, err)
			}
			all = append(all, chunk...)
			want := all[max(0, len(all)-limit):]
			if got := tb.String(); got != string(want) {
				t.Fatalf("limit %d, write %d: tail mismatch (len %d, want %d)", limit, i, len(got), len(want))
			}
			if len(tb.buf) > 2*limit {
				t.Fatalf("buffer grew to %d bytes, bound %d", len(tb.buf), 2*limit)
			}
		}
	}
	if got := newTailBuffer(10).String(); got != "" {
		t.Errorf("empty tail = %q", got)
	}
}

func TestExitString(t *testing.T) {
	tests := []struct {
		e       Exit
		str     string
		success bool
	}{
		{Exit{Code: 0}, "exit status 0", true},
		{Exit{Code: 3}, "exit status 3", false},
		{Exit{Code: -1, Signal: "terminated", Stopped: true}, "killed by signal terminated", false},
		{Exit{Code: -1, Signal: "killed"}, "killed by signal killed", false},
		{Exit{Code: -1, Err: errors.New("wait: no child processes")}, "wait failed: wait: no child processes", false},
	}
	for _, tt := range tests {
		if got := tt.e.String(); got != tt.str {
			t.Errorf("String(%+v) = %q, want %q", tt.e, got, tt.str)
		}
		if got := tt.e.Success(); got != tt.success {
			t.Errorf("Success(%+v) = %v", tt.e, got)
		}
	}
}

func TestIsJSON(t *testing.T) {
	for in, want := range map[string]bool{
		"{}": true, " \t{": true, "\r\n{": true, "": false, "   ": false,
		"[1]": false, `"s"`: false, "x{": false, "\v{": false,
	} {
		if got := isJSON([]byte(in)); got != want {
			t.Errorf("isJSON(%q) = %v", in, got)
		}
	}
}
