//go:build unix

package proc

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"testing"
)

const benchLines = 100_000

func benchBytes() int64 {
	var b []byte
	for i := range benchLines {
		b = appendBenchLine(b, i)
	}
	return int64(len(b))
}

// BenchmarkLines measures Lines end to end: a child writes benchLines
// ~500-byte JSON lines and the parent reads them all.
func BenchmarkLines(b *testing.B) {
	spec := fakeSpec(b, "bench", strconv.Itoa(benchLines))
	b.SetBytes(benchBytes())
	for b.Loop() {
		p, err := Start(context.Background(), spec)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for _, err := range p.Lines() {
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if e := p.Wait(); !e.Success() || n != benchLines {
			b.Fatalf("exit %v, %d lines", e, n)
		}
		_ = p.Close()
	}
}

// BenchmarkLinesBaselineScanner does the same with exec's StdoutPipe and a
// bufio.Scanner with a 64 MiB buffer, for comparison.
func BenchmarkLinesBaselineScanner(b *testing.B) {
	spec := fakeSpec(b, "bench", strconv.Itoa(benchLines))
	b.SetBytes(benchBytes())
	for b.Loop() {
		cmd := exec.Command(spec.Path)
		cmd.Env = spec.Env
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 64<<10), DefaultMaxLineBytes)
		n := 0
		for sc.Scan() {
			if isJSON(sc.Bytes()) {
				n++
			}
		}
		if err := sc.Err(); err != nil {
			b.Fatal(err)
		}
		if err := cmd.Wait(); err != nil || n != benchLines {
			b.Fatalf("wait %v, %d lines", err, n)
		}
	}
}

// BenchmarkScanLinesInMemory isolates the line splitter from process and
// pipe costs.
func BenchmarkScanLinesInMemory(b *testing.B) {
	var data []byte
	for i := range benchLines {
		data = appendBenchLine(data, i)
	}
	b.SetBytes(int64(len(data)))
	var skipped atomic.Int64
	for b.Loop() {
		n := 0
		scanLines(bytes.NewReader(data), readBufSize, DefaultMaxLineBytes, &skipped, func([]byte, error) bool {
			n++
			return true
		})
		if n != benchLines {
			b.Fatalf("%d lines", n)
		}
	}
}
