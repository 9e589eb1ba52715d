package proc

import "sync"

// tailBuffer is an io.Writer that keeps only the last max bytes written.
// It stores up to 2*max bytes and compacts when that fills, so each byte is
// copied a bounded number of times however stderr is chunked.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(b []byte) (int, error) {
	n := len(b)
	t.mu.Lock()
	defer t.mu.Unlock()
	if n >= t.max {
		t.buf = append(t.buf[:0], b[n-t.max:]...)
		return n, nil
	}
	if len(t.buf)+n > 2*t.max {
		keep := t.max - n
		copy(t.buf, t.buf[len(t.buf)-keep:])
		t.buf = t.buf[:keep]
	}
	t.buf = append(t.buf, b...)
	return n, nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf[max(0, len(t.buf)-t.max):])
}
