package protocol

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"

	"github.com/drover-run/drover/api"
)

// Serve speaks the protocol over r (requests, one a line) and w (responses
// and events, one a line) until r ends or ctx is cancelled, then shuts the
// connection down (Conn.Shutdown: the runs it started are cancelled) and
// returns once every line was written: nil at the end of r, ctx's error
// after cancellation, or the read error.
//
// Lines have no length limit short of Config.MaxLine; a longer one is
// answered with INVALID_REQUEST and skipped. If w fails, output is
// discarded and Serve goes on reading (the runs keep their ledger).
//
// A Read blocked when ctx is cancelled is interrupted by closing r when it
// is an io.Closer, and waited for; otherwise it is left behind (os.Stdin
// cannot be interrupted: pass it hidden behind a plain io.Reader and let
// the process exit).
func Serve(ctx context.Context, s *Server, r io.Reader, w io.Writer) error {
	return serveConn(ctx, s.NewConn(), r, w)
}

// serveConn is Serve over the connection c (a new one, or one scoped to a
// run: ServeNested).
func serveConn(ctx context.Context, c *Conn, r io.Reader, w io.Writer) error {
	s := c.s
	var writer sync.WaitGroup
	// The writer goroutine is the only one that writes w, so lines never
	// interleave; it drains the queue until the connection ends.
	writer.Go(func() {
		bw := bufio.NewWriterSize(w, 64<<10)
		var werr error
		for {
			line, ok := c.Next()
			if !ok {
				break
			}
			if werr != nil {
				continue
			}
			if _, werr = bw.Write(line); werr == nil {
				werr = bw.WriteByte('\n')
			}
			if werr == nil && len(c.out) == 0 {
				werr = bw.Flush()
			}
		}
		if werr == nil {
			_ = bw.Flush()
		}
	})
	read := make(chan error, 1)
	go func() { read <- readLines(r, s.cfg.MaxLine, c) }()
	var err error
	select {
	case err = <-read:
		if errors.Is(err, io.EOF) {
			err = nil
		}
		c.Shutdown(ctx)
	case <-ctx.Done():
		err = ctx.Err()
		closer, ok := r.(io.Closer)
		if ok {
			_ = closer.Close()
		}
		c.Shutdown(ctx)
		if ok {
			<-read
		}
	}
	writer.Wait()
	return err
}

// readLines hands each line of r to c until r ends.
func readLines(r io.Reader, maxLine int, c *Conn) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		switch {
		case tooLong:
		case len(line)+len(chunk) > maxLine+1: // +1: the newline
			tooLong, line = true, line[:0]
		default:
			line = append(line, chunk...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if tooLong {
			c.handleSync(nullID, errorf(api.CodeInvalidRequest, "line longer than %d bytes", maxLine))
			tooLong = false
		} else if len(line) > 0 {
			c.Handle(line)
		}
		line = line[:0]
		if err != nil {
			return err
		}
	}
}
