//go:build linux

package bench

import (
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"
)

// PERF-3: the serve scenario's CPU figures are the measured process's own
// CPU time and the machine's over the window: a process spinning a core
// through the window shows as busy, one idle through it as not, and a
// scenario that ends before its window reports nothing.
func TestPERF3_ServeCPUWindowIsTheProcesssOwn(t *testing.T) {
	from := time.Now().Add(50 * time.Millisecond)
	to := from.Add(400 * time.Millisecond)
	stop := make(chan struct{})
	var spin sync.WaitGroup
	spin.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	w, ok := measureCPU(nil, os.Getpid(), from, to)
	close(stop)
	spin.Wait()
	if !ok {
		t.Fatal("no window measured")
	}
	// A spinning goroutine is a core's worth of CPU time, or its share of
	// a loaded machine's; zero means the wrong process or fields were read.
	if w.Cores < 0.02 || w.Cores > 64 || w.Busy <= 0 || w.Busy > 100 || w.Steal < 0 || w.Seconds < 0.3 {
		t.Errorf("spinning: %+v; want about a core of this process's CPU and a busy machine", w)
	}

	from = time.Now().Add(20 * time.Millisecond)
	idle, ok := measureCPU(nil, os.Getpid(), from, from.Add(300*time.Millisecond))
	if !ok {
		t.Fatal("no idle window measured")
	}
	if idle.Cores >= w.Cores {
		t.Errorf("idle: %.2f cores, not less than spinning (%.2f)", idle.Cores, w.Cores)
	}

	done := make(chan struct{})
	close(done)
	if w, ok := measureCPU(done, os.Getpid(), time.Now().Add(time.Hour), time.Now().Add(2*time.Hour)); ok {
		t.Errorf("a scenario that ended before its window measured %+v", w)
	}
	if _, err := sampleCPU(-1); err == nil {
		t.Error("sampling no process gave no error")
	}
}

// PERF-3: `bench --json` carries the serve scenario's results, not only
// its configuration.
func TestPERF3_ServeJSONCarriesTheResults(t *testing.T) {
	res := ServeResult{ServeConfig: ServeConfig{Runs: 200, Rate: 20, Duration: time.Minute}, DurationSec: 60,
		Received: 240000, P99Ms: 12.5, SteadyCores: 0.4, SteadyUsPerLine: 100}
	b, err := json.Marshal(Report{Serve: &res})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Serve map[string]any `json:"serve"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]float64{"runs": 200, "rate": 20, "durationSec": 60, "received": 240000, "p99Ms": 12.5,
		"steadyCores": 0.4, "steadyUsPerLine": 100} {
		if v, ok := got.Serve[k].(float64); !ok || v != want {
			t.Errorf("serve.%s = %v, want %v in %s", k, got.Serve[k], want, b)
		}
	}
}
