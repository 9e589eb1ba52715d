// Command drover, built for profiling: scripts/bench --profile builds
// ./cmd/drover with this file in place of cmd/drover/main.go (go build
// -overlay), so that the profiled program is drover itself, unchanged but
// for the profiles its environment asks for:
//
//	DROVERTEST_BENCH_CPUPROFILE=FILE      a CPU profile of the whole process
//	DROVERTEST_BENCH_HEAPPROFILE=PREFIX   PREFIX-peak.pprof: the heap profile
//	                                  when the live heap was largest (as of
//	                                  the GC before); PREFIX-end.pprof: at
//	                                  exit after a GC, whose alloc_space
//	                                  and alloc_objects count everything
//	                                  the run allocated
//	DROVERTEST_BENCH_TRACE=FILE           an execution trace of the whole run
//	                                  (go tool trace -pprof=sync FILE: where
//	                                  goroutines waited)
//
// The heap is sampled every 64 KiB allocated (runtime.MemProfileRate)
// instead of 512 KiB. It lives in testdata so that no build of the module
// compiles it by itself; it must stay a copy of cmd/drover/main.go plus
// the profiles.
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"runtime/trace"
	"sync"
	"time"

	"github.com/drover-run/drover/cmd/drover/internal/cli"
)

func main() {
	stop := startProfiles()
	code := cli.Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// startProfiles starts what the environment asks for and returns the
// function that ends it and writes the files.
func startProfiles() (stop func()) {
	var stops []func()
	stops = recordTo(stops, "cpu profile", os.Getenv("DROVERTEST_BENCH_CPUPROFILE"), pprof.StartCPUProfile, pprof.StopCPUProfile)
	stops = recordTo(stops, "trace", os.Getenv("DROVERTEST_BENCH_TRACE"), trace.Start, trace.Stop)
	if prefix := os.Getenv("DROVERTEST_BENCH_HEAPPROFILE"); prefix != "" {
		runtime.MemProfileRate = 64 << 10
		stops = append(stops, heapProfiles(prefix))
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// recordTo starts a recording into the file path (none for an empty path)
// and adds what ends it to stops; a failure is reported and skipped.
func recordTo(stops []func(), what, path string, start func(io.Writer) error, stop func()) []func() {
	if path == "" {
		return stops
	}
	f, err := os.Create(path)
	if err == nil {
		err = start(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "drover: %s: %v\n", what, err)
		if f != nil {
			f.Close()
		}
		return stops
	}
	return append(stops, func() {
		stop()
		f.Close()
	})
}

// heapProfiles keeps a heap profile of the largest live heap seen (checked
// every 10 ms) and writes it and an end profile when stopped. The sampler
// goroutine is owned here: stopped and waited for by the returned func.
func heapProfiles(prefix string) func() {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak bytes.Buffer
	var peakBytes uint64
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	check := func() {
		metrics.Read(sample)
		if v := sample[0].Value.Uint64(); v > peakBytes+peakBytes/20 {
			peakBytes = v
			peak.Reset()
			_ = pprof.Lookup("heap").WriteTo(&peak, 0)
		}
	}
	wg.Go(func() {
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				check()
			case <-done:
				return
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
		check()
		if err := os.WriteFile(prefix+"-peak.pprof", peak.Bytes(), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "drover: heap profile:", err)
		}
		runtime.GC()
		f, err := os.Create(prefix + "-end.pprof")
		if err == nil {
			err = pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "drover: heap profile:", err)
		}
	}
}
