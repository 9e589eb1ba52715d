package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// readBufSize is the stdout read buffer of each process. A quarter of the
// Linux pipe's capacity: a busy child's lines take four reads instead of
// one (about 1 % of a 100,000-line run's time), and a server running 200
// agents holds 3 MB of buffers instead of 13. A longer line is
// read piecewise into a buffer of its own.
const readBufSize = 16 << 10

// keepLongBufMax bounds the accumulation buffer retained between lines, so
// one huge line does not pin tens of MiB for the rest of a long run.
const keepLongBufMax = 4 << 20

// LineTooLongError reports a stdout line longer than Spec.MaxLineBytes. The
// line was skipped without being buffered; it is recoverable and Lines
// continues with the next line.
type LineTooLongError struct {
	Size  int64 // bytes seen for the line, excluding its newline
	Limit int   // the MaxLineBytes in effect
}

// Error describes the skipped line's size and the limit.
func (e *LineTooLongError) Error() string {
	return fmt.Sprintf("proc: stdout line of %d bytes exceeds the %d-byte limit; line skipped", e.Size, e.Limit)
}

// scanLines splits r into lines and yields the JSON ones as described on
// Process.Lines. bufio.Scanner is not used because it stops for good at the
// first line longer than its buffer; a bufio.Reader lets an oversize line be
// discarded piecewise and reading go on.
func scanLines(r io.Reader, bufSize, limit int, skipped *atomic.Int64, yield func([]byte, error) bool) {
	br := bufio.NewReaderSize(r, bufSize)
	var (
		long []byte // the line so far, once it spans more than one buffer
		size int64  // bytes of the current line seen so far, newline included
		over bool   // the current line exceeded limit and is being discarded
	)
	for {
		frag, err := br.ReadSlice('\n')
		size += int64(len(frag))
		if errors.Is(err, bufio.ErrBufferFull) {
			// +1 leaves room for a trailing '\r' that will be stripped.
			if !over && size > int64(limit)+1 {
				over, long = true, long[:0]
			}
			if !over {
				long = append(long, frag...)
			}
			continue
		}
		eol := err == nil
		if eol || (size > 0 && errors.Is(err, io.EOF)) {
			line := frag
			if !over && len(long) > 0 {
				long = append(long, frag...)
				line = long
			}
			n := size
			if eol {
				line, n = line[:len(line)-1], n-1
			}
			if len(line) > 0 && line[len(line)-1] == '\r' {
				line, n = line[:len(line)-1], n-1
			}
			var ok bool
			switch {
			case over || n > int64(limit):
				ok = yield(nil, &LineTooLongError{Size: n, Limit: limit})
			case isJSON(line):
				ok = yield(line, nil)
			default:
				skipped.Add(1)
				ok = true
			}
			if !ok {
				return
			}
		}
		if cap(long) > keepLongBufMax {
			long = nil
		}
		long, size, over = long[:0], 0, false
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, os.ErrClosed) {
				yield(nil, fmt.Errorf("proc: read stdout: %w", err))
			}
			return
		}
	}
}

// isJSON reports whether the first non-whitespace byte of line is '{'.
func isJSON(line []byte) bool {
	for _, c := range line {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		default:
			return false
		}
	}
	return false
}
