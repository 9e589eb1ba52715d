//go:build linux

package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"
)

// Main is the harness's command line (scripts/bench passes its flags on);
// it returns the exit status: 0 when every measurement ran as the harness
// expects (targets missed are reported, not failed), 1 when one did not,
// 2 on a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	drover := fs.String("drover", "", "the drover executable to measure (required)")
	shapes := fs.String("shapes", "claude,gemini,codex", "shapes to measure, comma-separated (empty: none)")
	lines := fs.Int("n", 100_000, "body lines per run")
	reps := fs.Int("reps", 3, "repetitions, interleaved; medians are reported")
	text := fs.Int("text-chars", 0, "mean text length of a body line (0: each shape's default)")
	cancel := fs.Bool("cancel", true, "measure cancellation (with the throughput runs)")
	children := fs.Int("children", 2, "children of the fake in the cancellation runs")
	serve := fs.Bool("serve", false, "run the drover serve scenario only")
	all := fs.Bool("all", false, "run everything: throughput, cancellation and serve")
	runs := fs.Int("runs", 200, "serve: concurrent runs")
	rate := fs.Float64("rate", 20, "serve: lines per second of each run")
	duration := fs.Duration("duration", time.Minute, "serve: how long each run streams")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	profile := fs.String("profile", "", "write CPU and heap profiles of one more drover run per shape to this directory")
	profDrover := fs.String("profile-drover", "", "drover built for --profile (scripts/bench builds it)")
	dir := fs.String("dir", "", "scratch directory (default: the system's temporary directory)")
	quiet := fs.Bool("q", false, "do not log each measurement on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *drover == "" || fs.NArg() > 0 || *lines < 1 || *reps < 1 {
		fmt.Fprintln(stderr, "usage: bench --drover PATH [flags]; see scripts/bench --help")
		return 2
	}
	fake, err := os.Executable()
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	cfg := Config{Drover: *drover, Fake: fake, Dir: *dir, Lines: *lines, Reps: *reps, TextChars: *text,
		Cancel: *cancel, CancelChildren: *children, ProfileDir: *profile, ProfileDrover: *profDrover}
	if !*quiet {
		cfg.Log = stderr
	}
	if *serve || *all {
		cfg.Serve = &ServeConfig{Runs: *runs, Rate: *rate, Duration: *duration}
	}
	if !*serve {
		for name := range strings.SplitSeq(*shapes, ",") {
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			s, err := ShapeNamed(name)
			if err != nil {
				fmt.Fprintln(stderr, "bench:", err)
				return 2
			}
			cfg.Shapes = append(cfg.Shapes, s)
		}
	} else {
		cfg.Cancel = false
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := Run(ctx, cfg)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
	} else {
		rep.Print(stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "bench:", err)
		return 1
	}
	return 0
}

// Print writes the report as tables.
func (r Report) Print(w io.Writer) {
	m := r.Machine
	fmt.Fprintf(w, "machine: %s/%s, %d CPUs (%s), %s\n", m.OS, m.Arch, m.CPUs, m.CPU, m.Go)
	if len(r.Shapes) > 0 {
		fmt.Fprintf(w, "\ndrover run --json (ledger on) vs fake | cat, same lines: %d body lines, %d repetition(s) interleaved, medians\n\n", r.Lines, r.Reps)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "shape\tB/line\tdrover lines/s\tpipe lines/s\tratio\ttarget\tstream ratio\tpeak RSS\t≤25 MB\tfirst event\t≤2 ms\tunder load\tpipe first\twall s\tpipe wall s\tCPU s\tevents\t")
		for _, s := range r.Shapes {
			d, p := s.Drover, s.Pipe
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.1f%%\t%s\t%.1f%%\t%.1f MB\t%s\t%.2f ms\t%s\t%.2f ms\t%.3f ms\t%.2f\t%.2f\t%.2f\t%d\t\n",
				s.Shape, d.LineBytes, d.LinesPerSec, p.LinesPerSec, 100*s.Ratio, mark(s.Ratio >= s.TargetRatio, fmt.Sprintf("%.0f%%", 100*s.TargetRatio)),
				100*s.StreamRatio, mb(d.MaxRSS), mark(d.MaxRSS <= TargetRSS, ""), s.FirstEventMs, mark(s.FirstEventMs <= TargetFirstEventMs, ""),
				d.FirstEventMs, p.FirstEventMs, d.WallSec, p.WallSec, d.CPUSec, d.Printed)
		}
		tw.Flush()
		fmt.Fprintln(w, "\nratio: drover's lines/s over the pipe's (whole process, start to exit); stream ratio: the same from the fake's first line to the last line read.")
		fmt.Fprintln(w, "CPU s: user + system time of drover and the fake it started (wait4), the steadiest figure on a shared machine.")
		fmt.Fprintf(w, "first event: the vendor's line → drover's first event on stdout, in %d-line runs whose fake then pauses %v; under load: the same in the full run.\n", QuietLines, QuietPause)
		fmt.Fprintln(w, "peak RSS: wait4's maxrss of drover (the larger of drover's and the fake's own peaks; fake alone below).")
		for _, s := range r.Shapes {
			fmt.Fprintf(w, "  %s: %s; fake's own peak %.1f MB; events %v\n", s.Shape, s.Line, mb(s.Drover.FakeMaxRSS), s.Drover.Types)
		}
	}
	if len(r.Cancel) > 0 {
		fmt.Fprintf(w, "\ncancel: SIGINT to drover run -a claude, the fake streaming 20 lines/s with %d children in its group\n\n", r.Cancel[0].Children)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "fake\tgroup gone\ttarget (grace+100ms)\tdrover exit\texit code\tstatus\tleft behind\t")
		for _, c := range r.Cancel {
			fmt.Fprintf(tw, "%s\t%.1f ms\t%s\t%.1f ms\t%d\t%s\t%d\t\n", c.Variant, c.GoneMs,
				mark(c.GoneMs > 0 && c.GoneMs <= c.TargetMs, fmt.Sprintf("%.0f ms", c.TargetMs)), c.ExitMs, c.ExitCode, c.Status, c.LeftBehind)
		}
		tw.Flush()
	}
	if s := r.Serve; s != nil {
		fmt.Fprintf(w, "\ndrover serve: %d runs at once, each %g lines/s for %v, one SSE subscriber each\n\n", s.Runs, s.Rate, s.Duration)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		steady := "-"
		if s.SteadyP99Ms > 0 {
			steady = fmt.Sprintf("%.1f ms", s.SteadyP99Ms)
		}
		cores, perLine, busy := "-", "-", "-"
		if s.SteadyCores > 0 {
			cores = fmt.Sprintf("%.2f", s.SteadyCores)
			perLine = fmt.Sprintf("%.0f µs", s.SteadyUsPerLine)
			busy = fmt.Sprintf("%.0f%% (steal %.0f%%)", s.MachineBusy, s.Steal)
		}
		fmt.Fprintln(tw, "peak RSS\t≤150 MB\tp50\tp99\t≤50 ms\tsteady p99\tmax\tp99 to drover\texpected\treceived\tlost\tgaps\tfailed runs\tstart s\twall s\tsteady CPU\tCPU/line\tmachine busy\t")
		fmt.Fprintf(tw, "%.1f MB\t%s\t%.1f ms\t%.1f ms\t%s\t%s\t%.1f ms\t%.0f ms\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f\t%s\t%s\t%s\t\n", mb(s.PeakRSS), mark(s.PeakRSS <= TargetServeRSS, ""),
			s.P50Ms, s.P99Ms, mark(s.P99Ms <= TargetServeP99Ms, ""), steady, s.MaxMs, s.ReadP99Ms, s.Expected, s.Received, s.Lost, s.Gaps, s.Failed, s.StartSec, s.WallSec, cores, perLine, busy)
		tw.Flush()
		fmt.Fprintln(w, "\np50/p99/max: the fake's line → its SSE event at the subscriber; steady p99: the same of the lines written from 2 s after the last run was started to 2 s before the first could end (the runs start and end together); p99 to drover: the fake's line → drover's translating it (event timestamp, ±1 ms); steady CPU: drover serve's own (not its fakes'), in cores, over the steady p99's window, and per line the fakes wrote; machine busy: the share of all CPUs busy then (steal: taken by the hypervisor).")
	}
	for _, f := range r.Profiles {
		fmt.Fprintln(w, "profile:", f)
	}
}

// mark is label followed by "ok" or "MISS".
func mark(ok bool, label string) string {
	word := "MISS"
	if ok {
		word = "ok"
	}
	if label == "" {
		return word
	}
	return label + " " + word
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }
