//go:build linux

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ServeConfig is the serve scenario: Runs runs started at once through
// drover serve's HTTP API, each a fake printing Rate lines a second for
// Duration, one SSE subscriber per run.
type ServeConfig struct {
	Runs     int           `json:"runs"`
	Rate     float64       `json:"rate"`
	Duration time.Duration `json:"-"` // ServeResult.DurationSec
}

// ServeResult is what the serve scenario measured.
type ServeResult struct {
	ServeConfig
	// DurationSec is ServeConfig.Duration, in seconds.
	DurationSec float64 `json:"durationSec"`
	// Expected is the text events the runs' fakes print in all (Runs ×
	// Rate × Duration), Received those the subscribers got; Lost is the
	// difference, Gaps the seq numbers missing from the streams, Failed
	// the runs whose done was not success (or missing).
	Expected int `json:"expected"`
	Received int `json:"received"`
	Lost     int `json:"lost"`
	Gaps     int `json:"gaps"`
	Failed   int `json:"failed"`
	// P50Ms, P99Ms and MaxMs are the latency from the fake's writing a
	// line (the time it puts in the line's text) to its SSE event's
	// arrival at the subscriber.
	P50Ms float64 `json:"p50Ms"`
	P99Ms float64 `json:"p99Ms"`
	MaxMs float64 `json:"maxMs"`
	// SteadyP99Ms is P99Ms of the lines the fakes wrote while every run
	// was streaming, from steadyMargin after the last run was started to
	// steadyMargin before the first could end; 0 when the scenario is too
	// short to have such a time. The runs start together and end
	// together, and each start and end costs drover (and the machine)
	// far more than a line: this separates those bursts from the steady
	// state.
	SteadyP99Ms float64 `json:"steadyP99Ms"`
	// SteadyCores is drover serve's CPU time (all its threads, not the
	// fakes) over the same window, in cores, and SteadyUsPerLine that
	// time per line the fakes wrote in it (Runs × Rate a second), µs:
	// drover's own cost, steadier than its latency on a shared machine.
	// MachineBusy and Steal are the shares of the whole machine's CPU
	// time busy (drover, the fakes, this harness, anything else) and
	// taken by the hypervisor over the window, %: a latency measured on a
	// machine near 100 % busy is a queue for the CPU. All 0 when the
	// scenario has no steady window.
	SteadyCores     float64 `json:"steadyCores"`
	SteadyUsPerLine float64 `json:"steadyUsPerLine"`
	MachineBusy     float64 `json:"machineBusy"`
	Steal           float64 `json:"steal"`
	// ReadP99Ms is the p99 of the first part of that: from the fake's
	// writing the line to drover's translating it (the event's timestamp,
	// whole milliseconds, so ±1 ms). It tells the time spent reaching
	// drover (the fake, the pipe, the scheduler) from the time spent in
	// drover and on the way to the subscriber.
	ReadP99Ms float64 `json:"readP99Ms"`
	// PeakRSS is drover serve's peak resident set (VmHWM of
	// /proc/PID/status, read before it was stopped), in bytes; it does
	// not include the fakes, which are processes of their own.
	PeakRSS int64 `json:"peakRss"`
	// WallSec is from the first POST to the last stream's end.
	WallSec float64 `json:"wallSec"`
	// StartSec is how long the POSTs took, all runs' starts.
	StartSec float64 `json:"startSec"`
	// ExitCode is drover serve's after SIGINT (130), LeftBehind the
	// processes of the harness still alive after it exited.
	ExitCode   int `json:"exitCode"`
	LeftBehind int `json:"leftBehind"`
}

// RunServe runs the serve scenario (see ServeConfig) on a drover serve of
// its own (127.0.0.1, an ephemeral port, no token, --limit Runs, its own
// ledger), and stops it with SIGINT at the end.
func (e *Env) RunServe(ctx context.Context, cfg ServeConfig) (ServeResult, error) {
	res := ServeResult{ServeConfig: cfg, DurationSec: cfg.Duration.Seconds()}
	lines := int(cfg.Rate * cfg.Duration.Seconds())
	res.Expected = lines * cfg.Runs
	s, err := e.newSandbox()
	if err != nil {
		return res, err
	}
	defer s.remove()
	env := e.environ(s, LinesEnv+"="+strconv.Itoa(lines), RateEnv+"="+strconv.FormatFloat(cfg.Rate, 'f', -1, 64),
		StampTextEnv+"=1")
	c := command(ctx, env, s.work, e.Drover, "serve", "--addr", "127.0.0.1:0", "--no-token",
		"--limit", strconv.Itoa(cfg.Runs), "--db", s.db)
	errOut, err := c.StderrPipe()
	if err != nil {
		return res, err
	}
	if err := c.Start(); err != nil {
		return res, err
	}
	// The stderr reader is owned here: it ends with drover's stderr and is
	// waited for before Wait.
	addr := make(chan string, 1)
	stderr := &tail{max: 16 << 10}
	var readers sync.WaitGroup
	readers.Go(func() {
		sc := bufio.NewScanner(errOut)
		for sc.Scan() {
			line := sc.Text()
			if a, ok := strings.CutPrefix(line, "drover: serving HTTP on "); ok {
				addr <- a
			}
			fmt.Fprintln(stderr, line)
		}
		_, _ = io.Copy(io.Discard, errOut)
	})
	stop := func() {
		_ = c.Process.Signal(syscall.SIGINT)
		t := time.AfterFunc(10*time.Second, func() { _ = c.Cancel() })
		readers.Wait()
		err := c.Wait()
		t.Stop()
		res.ExitCode = c.ProcessState.ExitCode()
		if err != nil && !errors.As(err, new(*exec.ExitError)) {
			res.ExitCode = -1
		}
		res.LeftBehind = e.killLeftovers()
	}
	var base string
	select {
	case base = <-addr:
	case <-time.After(15 * time.Second):
		stop()
		return res, fmt.Errorf("drover serve did not start within 15 s: %s", stderr)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.Runs, DisableCompression: true}}
	defer client.CloseIdleConnections()
	sctx, cancel := context.WithTimeout(ctx, cfg.Duration+2*time.Minute)
	defer cancel()
	subs := make([]*subscriber, 0, cfg.Runs)
	var streams sync.WaitGroup
	start := time.Now()
	var startErr error
	for range cfg.Runs {
		id, err := startRun(sctx, client, base)
		if err != nil {
			startErr = err
			break
		}
		sub := &subscriber{run: id}
		subs = append(subs, sub)
		streams.Go(func() { sub.follow(sctx, client, base) })
	}
	res.StartSec = time.Since(start).Seconds()
	if startErr != nil {
		cancel()
	}
	// The steady state: every run started steadyMargin ago or more, none
	// near its end. Its CPU is sampled by a goroutine of this function,
	// stopped by done once the streams have ended and waited for.
	lo := start.Add(time.Duration(res.StartSec*float64(time.Second)) + steadyMargin)
	hi := start.Add(cfg.Duration - steadyMargin)
	var cpu cpuWindow
	var sampler sync.WaitGroup
	done := make(chan struct{})
	if startErr == nil && hi.After(lo) {
		sampler.Go(func() {
			if w, ok := measureCPU(done, c.Process.Pid, lo, hi); ok {
				cpu = w
			}
		})
	}
	streams.Wait()
	close(done)
	sampler.Wait()
	if cpu.Seconds > 0 {
		res.SteadyCores, res.MachineBusy, res.Steal = cpu.Cores, cpu.Busy, cpu.Steal
		res.SteadyUsPerLine = 1e6 * cpu.Cores / (float64(cfg.Runs) * cfg.Rate)
	}
	res.WallSec = time.Since(start).Seconds()
	res.PeakRSS, _ = procStatus(c.Process.Pid, "VmHWM")
	stop()
	if startErr != nil {
		return res, fmt.Errorf("start run %d: %w", len(subs)+1, startErr)
	}
	var lat, sent, read []int64
	var errs []error
	for _, sub := range subs {
		res.Received += sub.texts
		res.Gaps += sub.gaps
		if sub.status != "success" {
			res.Failed++
		}
		if sub.err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", sub.run, sub.err))
		}
		lat = append(lat, sub.latencies...)
		sent = append(sent, sub.sent...)
		read = append(read, sub.reads...)
	}
	res.Lost = res.Expected - res.Received
	res.ReadP99Ms = p99Ms(read)
	res.SteadyP99Ms = steadyP99(lat, sent, lo.UnixNano(), hi.UnixNano())
	res.P99Ms = p99Ms(lat) // after steadyP99, which pairs lat with sent
	if len(lat) > 0 {
		res.P50Ms = float64(lat[len(lat)/2]) / 1e6
		res.MaxMs = float64(lat[len(lat)-1]) / 1e6
	}
	switch {
	case len(errs) > 0:
		return res, errors.Join(errs...)
	case res.Lost != 0 || res.Gaps != 0 || res.Failed != 0:
		return res, fmt.Errorf("serve: %d events lost, %d seq gaps, %d runs not successful", res.Lost, res.Gaps, res.Failed)
	case res.LeftBehind != 0:
		return res, fmt.Errorf("serve: %d processes left behind", res.LeftBehind)
	}
	return res, nil
}

// startRun starts one run (POST /v1/runs) and returns its id.
func startRun(ctx context.Context, client *http.Client, base string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/runs",
		strings.NewReader(`{"agent":"claude","prompt":"bench"}`))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct {
		RunID string `json:"runId"`
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusCreated || json.Unmarshal(body, &r) != nil || r.RunID == "" {
		return "", fmt.Errorf("POST /v1/runs: %s %s", resp.Status, body)
	}
	return r.RunID, nil
}

// subscriber follows one run's SSE stream (GET /v1/runs/{id}/stream) to
// its end.
type subscriber struct {
	run       string
	texts     int
	gaps      int
	lastSeq   int
	status    string
	latencies []int64 // ns
	sent      []int64 // when the fake wrote each of latencies' lines, Unix ns
	reads     []int64 // ns, from the fake's line to drover's event timestamp (ms)
	err       error
}

func (s *subscriber) follow(ctx context.Context, client *http.Client, base string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+s.run+"/stream", nil)
	if err != nil {
		s.err = err
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		s.err = err
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		s.err = fmt.Errorf("stream: %s", resp.Status)
		return
	}
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	for {
		line, err := br.ReadSlice('\n')
		if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
			s.event(data, time.Now().UnixNano())
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				s.err = err
			}
			return
		}
	}
}

// event takes one SSE data line, received at now.
func (s *subscriber) event(data []byte, now int64) {
	var ev struct {
		Type      string `json:"type"`
		Seq       int    `json:"seq"`
		Timestamp int64  `json:"timestamp"` // ms
		Payload   struct {
			Content string `json:"content"`
			Status  string `json:"status"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(data, &ev); err != nil {
		s.err = fmt.Errorf("undecodable event %q: %w", data, err)
		return
	}
	if ev.Seq != s.lastSeq+1 {
		s.gaps += max(ev.Seq-s.lastSeq-1, 1)
	}
	s.lastSeq = ev.Seq
	switch ev.Type {
	case "text":
		s.texts++
		if t, ok := strings.CutPrefix(ev.Payload.Content, "t="); ok {
			ns, _, _ := strings.Cut(t, " ")
			if at, err := strconv.ParseInt(ns, 10, 64); err == nil {
				s.latencies = append(s.latencies, now-at)
				s.sent = append(s.sent, at)
				s.reads = append(s.reads, ev.Timestamp*int64(time.Millisecond)-at)
			}
		}
	case "done":
		s.status = ev.Payload.Status
	}
}

// steadyMargin is how long after the runs' starts, and before their ends,
// the steady state begins and ends (ServeResult.SteadyP99Ms).
const steadyMargin = 2 * time.Second

// steadyP99 is the p99 (ms) of the latencies whose line was sent within
// [lo, hi] (Unix ns); 0 when none was.
func steadyP99(lat, sent []int64, lo, hi int64) float64 {
	var in []int64
	for i, at := range sent {
		if at >= lo && at <= hi {
			in = append(in, lat[i])
		}
	}
	return p99Ms(in)
}

// p99Ms is the p99 of ns (nanoseconds) in ms, sorting ns; 0 for none.
func p99Ms(ns []int64) float64 {
	if len(ns) == 0 {
		return 0
	}
	slices.Sort(ns)
	return float64(ns[min(len(ns)-1, len(ns)*99/100)]) / 1e6
}
