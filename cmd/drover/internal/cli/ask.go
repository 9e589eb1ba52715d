package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/termtext"
	"github.com/drover-run/drover/store"
)

// asker asks the person at the terminal to answer the permission requests
// of the runs drover run follows (CTL-1, CON-1). Every request is shown as
// it comes, on a line of its own with its run's label, what it wants to do
// and when its own deadline denies it; the question is about the oldest,
// and says how many more are waiting. y allows, n [MESSAGE] denies (the
// model is told MESSAGE), a allows for the rest of the run. A request
// answered elsewhere meanwhile (a rule, the deadline, the dashboard,
// drover approve or inbox) is dropped from the questions.
type asker struct {
	svc    api.Service
	con    *console
	labels map[string]string // run id → label, for parallel runs
	multi  bool

	events chan drover.Event // requests and answers, from the follow loop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// question is one open request.
type question struct {
	run string
	req drover.PermissionRequestPayload
}

func newAsker(svc api.Service, in io.Reader, con *console, labels map[string]string, multi bool) *asker {
	ctx, cancel := context.WithCancel(context.Background())
	a := &asker{svc: svc, con: con, labels: labels, multi: multi, events: make(chan drover.Event, 64), cancel: cancel}
	lines := make(chan string)
	// The line reader is not owned like the rest: a Read of a terminal in
	// progress cannot be interrupted, so when drover run ends it is left
	// blocked and goes with the process. It sends nothing once ctx ends.
	go func() {
		r := bufio.NewReader(in)
		for {
			s, err := r.ReadString('\n')
			if s != "" {
				select {
				case lines <- strings.TrimSpace(s):
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				close(lines)
				return
			}
		}
	}()
	a.wg.Go(func() { a.loop(ctx, lines) })
	return a
}

// seen hands the asker an event as drover run prints it.
func (a *asker) seen(se store.Event) {
	if se.Type != drover.TypePermissionRequest && se.Type != drover.TypePermissionAnswer {
		return
	}
	ev, err := decodeStored(se)
	if err != nil {
		return
	}
	if p, ok := ev.Payload.(drover.PermissionRequestPayload); ok && p.AnsweredBy != "" {
		return // a rule answered it as it was asked: nothing to ask
	}
	a.events <- ev
}

// stop ends the asking and waits for it.
func (a *asker) stop() {
	a.cancel()
	a.wg.Wait()
	a.con.setPrompt("")
}

func (a *asker) loop(ctx context.Context, lines <-chan string) {
	var queue []question      // open requests, oldest first; the question is about queue[0]
	var typed []string        // lines typed ahead of their question (answers piped in with --ask)
	mine := map[string]bool{} // requests answered here: their answer needs no notice
	asked := ""               // the request the prompt shows
	ask := func() {
		if len(queue) == 0 {
			asked = ""
			a.con.setPrompt("")
			return
		}
		asked = queue[0].run + "/" + queue[0].req.RequestID
		a.con.setPrompt(a.prompt(queue[0], len(queue)-1))
	}
	// answer takes line as the answer to queue[0]; a line typed ahead is
	// shown after its question (a terminal already echoed a line typed at
	// it).
	answer := func(line string, ahead bool) {
		if ahead {
			a.con.echo(line)
		}
		d, ok := parseAnswer(line)
		if !ok {
			a.con.line("    answer y, n [MESSAGE] or a(lways)")
			ask()
			return
		}
		cur := queue[0]
		queue = queue[1:]
		mine[cur.run+"/"+cur.req.RequestID] = true
		if _, err := a.svc.Respond(ctx, api.RespondParams{RunID: cur.run, RequestID: cur.req.RequestID, PermissionDecision: d, By: "terminal"}); err != nil {
			a.con.line(fmt.Sprintf("    (%v)", err))
		}
		ask()
	}
	for {
		if len(queue) > 0 && len(typed) > 0 {
			line := typed[0]
			typed = typed[1:]
			answer(line, true)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case ev := <-a.events:
			switch p := ev.Payload.(type) {
			case drover.PermissionRequestPayload:
				q := question{ev.RunID, p}
				queue = append(queue, q)
				a.con.line(a.requestLine(q))
				if len(queue) == 1 || asked != "" {
					ask() // a new question, or the count of those waiting
				}
			case drover.PermissionAnswerPayload:
				key := ev.RunID + "/" + p.RequestID
				i := slices.IndexFunc(queue, func(q question) bool { return q.run == ev.RunID && q.req.RequestID == p.RequestID })
				if i < 0 {
					continue
				}
				queue = slices.Delete(queue, i, i+1)
				if !mine[key] {
					a.con.line(fmt.Sprintf("    (%s%s answered by %s: %s)", a.label(ev.RunID), termtext.Quote(p.ToolName), answerSource(p), p.Behavior))
				}
				ask()
			}
		case line, ok := <-lines:
			if !ok {
				lines = nil // stdin closed: the deadline answers the rest
				continue
			}
			if len(queue) == 0 {
				typed = append(typed, line)
				continue
			}
			answer(line, false)
		}
	}
}

// label is run's label and a space, when several runs share the terminal.
func (a *asker) label(run string) string {
	if !a.multi {
		return ""
	}
	return "[" + a.labels[run] + "] "
}

// requestLine shows q as it comes: who, what, and its own deadline.
func (a *asker) requestLine(q question) string {
	s := fmt.Sprintf("%s  ? %s wants to: %s", a.label(q.run), termtext.Quote(q.req.ToolName), describeRequest(q.req))
	if q.req.Deadline > 0 {
		at := time.UnixMilli(q.req.Deadline)
		s += fmt.Sprintf(" — denied at %s (in %s) without an answer", at.Format("15:04:05"), deadlineIn(time.Now(), q.req.Deadline))
	}
	if exact := requestSubject(q.req); exact != "" {
		s += "\n" + a.label(q.run) + "    exactly: " + exact
	}
	return s
}

// prompt is the question about q, more being the requests waiting after it.
func (a *asker) prompt(q question, more int) string {
	wait := ""
	if q.req.Deadline > 0 {
		wait = ", denied in " + deadlineIn(time.Now(), q.req.Deadline)
	}
	if more > 0 {
		wait += fmt.Sprintf(" · %d more waiting", more)
	}
	return fmt.Sprintf("%s    %s: allow? y(es), n(o) [MESSAGE], a(lways)%s: ", a.label(q.run), termtext.Quote(q.req.ToolName), wait)
}

// console is the output drover run shares between the runs' events and
// the asker's question (CON-1): the question, when there is one, is
// always last, so that no run's output lands inside it. Output that comes
// while the question is shown goes above it: on a terminal the question's
// line is cleared and drawn again after the output; elsewhere the output
// starts on a line of its own and the question is written again after it.
// An answer typed at a terminal leaves the question "shown": its echo may
// have come before the question did, so the next output clears the line
// it is on either way (an empty line, or the question left unanswered).
type console struct {
	mu       sync.Mutex
	w        io.Writer
	tty      bool
	prompt   string
	atPrompt bool // the prompt is the last thing written, its line not ended
}

func newConsole(w io.Writer) *console { return &console{w: w, tty: isTerminal(w)} }

// Write writes p, whole lines of output, above the question.
func (c *console) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leavePrompt()
	n, err := c.w.Write(p)
	if err == nil && c.prompt != "" && len(p) > 0 && p[len(p)-1] == '\n' {
		c.showPrompt()
	}
	return n, err
}

// line writes s and a newline above the question.
func (c *console) line(s string) { _, _ = c.Write([]byte(s + "\n")) }

// setPrompt makes s the question shown last ("" for none) and shows it.
func (c *console) setPrompt(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if s == c.prompt && (c.atPrompt || s == "") {
		return
	}
	c.leavePrompt()
	c.prompt = s
	if s != "" {
		c.showPrompt()
	}
}

// echo shows line, an answer typed ahead of its question (a terminal
// echoed it before the question was shown; piped, it was never shown),
// after the question, and ends the question's line.
func (c *console) echo(line string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, _ = io.WriteString(c.w, line+"\n")
	c.atPrompt = false
}

func (c *console) leavePrompt() {
	if !c.atPrompt {
		return
	}
	if c.tty {
		_, _ = io.WriteString(c.w, "\r\x1b[K") // the question's line, cleared
	} else {
		_, _ = io.WriteString(c.w, "\n")
	}
	c.atPrompt = false
}

func (c *console) showPrompt() {
	_, _ = io.WriteString(c.w, c.prompt)
	c.atPrompt = true
}

// parseAnswer reads a person's answer: y, yes, n, no, a, always, and after
// n or no a message for the model.
func parseAnswer(line string) (drover.PermissionDecision, bool) {
	word, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
	switch strings.ToLower(word) {
	case "y", "yes":
		return drover.PermissionDecision{Behavior: drover.Allow}, true
	case "a", "always":
		return drover.PermissionDecision{Behavior: drover.Allow, Always: true}, true
	case "n", "no":
		return drover.PermissionDecision{Behavior: drover.Deny, Message: strings.TrimSpace(rest)}, true
	}
	return drover.PermissionDecision{}, false
}
