package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/termtext"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
	"golang.org/x/term"
)

// printList prints items as JSON lines, or as a table with header and one
// row of cells per item.
func printList[T any](e *env, asJSON bool, items []T, header []string, row func(T) []string) error {
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		for _, it := range items {
			if err := enc.Encode(it); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, it := range items {
		cells := row(it)
		for i, c := range cells {
			cells[i] = termtext.Strip(c)
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return tw.Flush()
}

func age(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return time.Since(t).Round(time.Second).String() + " ago"
}

// runStatus is a run's outcome as the CLI's lists show it (drover.Outcome):
// why it failed in brackets, what was denied after it.
func runStatus(r store.Run, errWidth int) string {
	o := r.Outcome()
	st := string(o)
	if o == drover.OutcomeFailed && r.Error != "" {
		st += " (" + firstLine(r.Error, errWidth) + ")"
	}
	if r.Denied > 0 {
		st += fmt.Sprintf(", %d denied", r.Denied)
	}
	return st
}

// roundDuration is d as a person reads it: to the millisecond under a
// second, to the tenth of a second under a minute, to the second above.
func roundDuration(d time.Duration) string {
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func duration(r store.Run) string {
	switch {
	case r.DurationMs > 0:
		return roundDuration(time.Duration(r.DurationMs) * time.Millisecond)
	case !r.StartedAt.IsZero() && !r.Status.Terminal():
		return time.Since(r.StartedAt).Round(time.Second).String() + "…"
	}
	return "-"
}

// cost shows u's cost, with "~" before drover's estimate (docs/limits.md).
func cost(u drover.Usage) string {
	if u.TotalCostUSD == nil {
		return "-"
	}
	if u.CostEstimated {
		return fmt.Sprintf("~$%.4f", *u.TotalCostUSD)
	}
	return fmt.Sprintf("$%.4f", *u.TotalCostUSD)
}

func printStored(p printer, ev store.Event) error {
	if jp, ok := p.(*jsonPrinter); ok {
		if bw, ok := jp.w.(*bufio.Writer); ok {
			// Buffered: the line needs no copy of its own to go out whole.
			if _, err := bw.Write(ev.JSON); err != nil {
				return err
			}
			return bw.WriteByte('\n')
		}
		jp.buf = append(append(jp.buf[:0], ev.JSON...), '\n')
		_, err := jp.w.Write(jp.buf)
		if cap(jp.buf) > 64<<10 {
			jp.buf = nil // a long event's buffer is not kept for the rest
		}
		return err
	}
	d, err := decodeStored(ev)
	if err != nil {
		return err
	}
	return p.print(d)
}

// decodeStored decodes a recorded event.
// storedOf is a recorded event's JSON (with runId and seq) as the ledger
// holds it.
func storedOf(raw json.RawMessage) (store.Event, error) {
	var head struct {
		RunID string           `json:"runId"`
		Seq   int64            `json:"seq"`
		Type  drover.EventType `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return store.Event{}, fmt.Errorf("an event of the ledger: %w", err)
	}
	return store.Event{RunID: head.RunID, Seq: head.Seq, Type: head.Type, JSON: raw}, nil
}

func decodeStored(ev store.Event) (drover.Event, error) {
	var d drover.Event
	if err := json.Unmarshal(ev.JSON, &d); err != nil {
		return d, fmt.Errorf("ledger event %s#%d: %w", ev.RunID, ev.Seq, err)
	}
	return d, nil
}

// inert is a writer of human output that holds no control sequences of
// drover's own: each write is stripped (SEC-6) before it goes on to w. A
// sequence split across two writes loses its start in the first and shows
// the rest as text; writers of whole lines lose nothing.
type inert struct{ w io.Writer }

func (i inert) Write(p []byte) (int, error) {
	if _, err := io.WriteString(i.w, termtext.Strip(string(p))); err != nil {
		return 0, err
	}
	return len(p), nil
}

// isTerminal reports whether stream (stdin or stdout) is a terminal: a
// character device is not enough (/dev/null is one, and a run from cron,
// CI or nohup must not wait for a person who is not there).
func isTerminal(stream any) bool {
	switch w := stream.(type) {
	case *syncWriter:
		return isTerminal(w.w)
	case *console:
		return w.tty
	case inert:
		return isTerminal(w.w)
	case *os.File:
		// Through SyscallConn: Fd would put a file in Go's poller back
		// into blocking mode.
		rc, err := w.SyscallConn()
		if err != nil {
			return false
		}
		tty := false
		_ = rc.Control(func(fd uintptr) { tty = term.IsTerminal(int(fd)) })
		return tty
	}
	return false
}

type printer interface{ print(drover.Event) error }

// jsonPrinter writes exactly the UES events, one JSON object per line.
type jsonPrinter struct {
	w   io.Writer
	buf []byte // printStored's, reused: w does not keep what it is given
}

func (p *jsonPrinter) print(ev drover.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	_, err = p.w.Write(append(data, '\n'))
	return err
}

// human is the readable view of events: live (run) or from the ledger
// (logs). Colour only on a terminal, and never with NO_COLOR set.
type human struct {
	w       io.Writer
	multi   bool
	partial bool
	color   bool
	asking  bool              // an asker shows the permission requests
	inDelta map[string]bool   // run printed text deltas not yet closed by its text
	labels  map[string]string // run id → short label for interleaved output
	tallies map[string]*tally // run id → what its summary line says
}

// tally is what the human view counts of a run's events for its summary
// line: the same counts and outcome the ledger records at its end.
type tally struct {
	denied      map[string]bool // tool use ids denied
	allowed     int
	interrupted bool // a drover:interrupt came
	errCode     drover.ErrorCode
	model       string // from its init event
}

func (h *human) tally(runID string) *tally {
	t := h.tallies[runID]
	if t == nil {
		t = &tally{denied: map[string]bool{}}
		h.tallies[runID] = t
	}
	return t
}

// outcome is what a run that ended done p is, in drover's one vocabulary
// (drover.Outcome, as store.Run.Outcome says it from the ledger).
func (t *tally) outcome(p drover.DonePayload) drover.Outcome {
	switch p.Status {
	case drover.StatusSuccess:
		return drover.OutcomeCompleted
	case drover.StatusMaxTurns:
		return drover.OutcomeMaxTurns
	case drover.StatusMaxBudget:
		return drover.OutcomeMaxBudget
	case drover.StatusInterrupted:
		if t.interrupted {
			return drover.OutcomeInterrupted
		}
		return drover.OutcomeCancelled
	}
	if t.errCode == drover.CodeTimeout || t.errCode == drover.CodeIdleTimeout {
		return drover.OutcomeTimedOut
	}
	return drover.OutcomeFailed
}

// count is "1 turn", "2 turns".
func count(n int64, one string) string {
	return fmt.Sprintf("%d %s", n, plural(int(n), one, one+"s"))
}

func newHuman(w io.Writer, multi, partial bool) *human {
	color := os.Getenv("NO_COLOR") == "" && isTerminal(w)
	return &human{w: w, multi: multi, partial: partial && !multi, color: color, inDelta: map[string]bool{},
		labels: map[string]string{}, tallies: map[string]*tally{}}
}

// paint is what the human view shows of s: s stripped of everything a
// terminal would act on (SEC-6), in colour code ("" for none). Every string
// the view prints passes here.
func (h *human) paint(code, s string) string {
	s = termtext.Strip(s)
	if !h.color || code == "" {
		return s
	}
	return "\x1b[" + code + "m" + s + "\x1b[0m"
}

func (h *human) line(ev drover.Event, s string) error {
	if h.multi {
		label := h.labels[ev.RunID]
		if label == "" {
			label = ev.RunID
		}
		s = h.paint("36", "["+label+"] ") + s
	}
	_, err := fmt.Fprintln(h.w, s)
	return err
}

func firstLine(s string, max int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > max {
		s = string(r[:max-1]) + "…"
	}
	return s
}

func (h *human) print(ev drover.Event) error {
	switch p := ev.Payload.(type) {
	case drover.ToolResultPayload:
		if p.Status == drover.ToolDenied {
			h.tally(ev.RunID).denied[p.ToolUseID] = true
		}
	case drover.PermissionAnswerPayload:
		if p.Behavior == drover.Deny {
			h.tally(ev.RunID).denied[p.ToolUseID] = true
		} else {
			h.tally(ev.RunID).allowed++
		}
	case drover.InterruptPayload:
		h.tally(ev.RunID).interrupted = true
	case drover.InitPayload:
		h.tally(ev.RunID).model = p.Model
	case drover.ErrorPayload:
		if !p.Recoverable {
			h.tally(ev.RunID).errCode = p.Code
		}
	}
	switch p := ev.Payload.(type) {
	case drover.InitPayload:
		return h.line(ev, h.paint("2", fmt.Sprintf("● %s · %s · %s", ev.Agent, p.Model, p.Cwd)))
	case drover.TextDeltaPayload:
		if h.partial {
			h.inDelta[ev.RunID] = true
			_, err := io.WriteString(h.w, h.paint("", p.Delta))
			return err
		}
	case drover.TextPayload:
		if h.inDelta[ev.RunID] {
			delete(h.inDelta, ev.RunID)
			_, err := fmt.Fprintln(h.w)
			return err
		}
		for l := range strings.SplitSeq(strings.TrimRight(p.Content, "\n"), "\n") {
			if err := h.line(ev, h.paint("", l)); err != nil {
				return err
			}
		}
	case drover.ThinkingPayload:
		return h.line(ev, h.paint("2", "  ∴ "+firstLine(p.Summary, 100)))
	case drover.ToolUsePayload:
		d := p.Description
		if d == "" {
			d = drover.DescribeCall(drover.ToolOther, p.ToolName, "")
		}
		// The command a call runs is shown as it is, controls included.
		return h.line(ev, h.paint("33", "  → "+termtext.Quote(d)))
	case drover.ToolResultPayload:
		switch p.Status {
		case drover.ToolSuccess:
			return h.line(ev, h.paint("32", "  ✓ "+p.ToolName)+h.paint("2", " "+firstLine(p.Output, 80)))
		case drover.ToolDenied:
			return h.line(ev, h.paint("35", "  ⊘ "+p.ToolName+" denied: "+firstLine(p.Output, 80)))
		default:
			return h.line(ev, h.paint("31", "  ✗ "+p.ToolName+": "+firstLine(p.Output, 80)))
		}
	case drover.PermissionRequestPayload:
		if h.asking || p.AnsweredBy != "" {
			return nil // the asker shows the question; a rule's answer follows
		}
		return h.line(ev, h.paint("35", "  ? "+p.ToolName+" asks for approval: "+describeRequest(p)+" (drover approve|deny "+ev.RunID+" "+p.RequestID+")"))
	case drover.PermissionAnswerPayload:
		verb, c := "allowed", "32"
		if p.Behavior == drover.Deny {
			verb, c = "denied", "35"
		}
		if p.Always {
			verb += " for the rest of the run"
		}
		return h.line(ev, h.paint(c, "  "+verb+" "+p.ToolName+" ("+answerSource(p)+")"))
	case drover.SteerPayload:
		return h.line(ev, h.paint("36", "  » "+firstLine(p.Message, 100)))
	case drover.InterruptPayload:
		return h.line(ev, h.paint("33", "  ‖ interrupted"))
	case drover.ErrorPayload:
		c := "31"
		if p.Recoverable {
			c = "33"
		}
		return h.line(ev, h.paint(c, fmt.Sprintf("  ! %s: %s", p.Code, firstLine(p.Message, 200))))
	case drover.DonePayload:
		return h.line(ev, h.doneLine(ev, p))
	}
	return nil
}

func (h *human) doneLine(ev drover.Event, p drover.DonePayload) string {
	t := h.tally(ev.RunID)
	delete(h.tallies, ev.RunID)
	o := t.outcome(p)
	parts := []string{string(o), roundDuration(time.Duration(p.DurationMs) * time.Millisecond)}
	u := p.Usage
	if u.InputTokens+u.OutputTokens > 0 {
		parts = append(parts, fmt.Sprintf("%d in / %d out tokens", u.InputTokens, u.OutputTokens))
	}
	if calls := runs.CallSummary(u.ToolUses, t.allowed, len(t.denied)); calls != "" {
		parts = append(parts, calls)
	}
	switch {
	case u.TotalCostUSD != nil:
		parts = append(parts, cost(u))
	case u.InputTokens+u.OutputTokens > 0 && t.model != "":
		// Not zero: unknown (ACC-2). drover prices says what is priced.
		parts = append(parts, "no price for "+t.model)
	}
	if u.Turns != nil {
		parts = append(parts, count(*u.Turns, "turn"))
	}
	if p.ResumeToken != "" {
		parts = append(parts, "resume "+p.ResumeToken)
	}
	c := "31" // red: failed
	switch {
	case o == drover.OutcomeCompleted && len(t.denied) > 0:
		c = "33" // completed, but without some of what it asked to do
	case o == drover.OutcomeCompleted:
		c = "32"
	case o == drover.OutcomeInterrupted || o == drover.OutcomeCancelled:
		c = "33"
	}
	return h.paint(c, "■ "+strings.Join(parts, " · "))
}
