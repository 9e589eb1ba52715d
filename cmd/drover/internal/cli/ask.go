package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/termtext"
	"github.com/drover-run/drover/store"
)

// asker asks the person at the terminal to answer the permission requests
// of the runs drover run follows (CTL-1): one question at a time, in the
// order the requests came; y allows, n [MESSAGE] denies (the model is told
// MESSAGE), a allows for the rest of the run. A request answered
// elsewhere meanwhile (a rule, the deadline, the dashboard, drover
// approve) is dropped from the questions.
type asker struct {
	svc    api.Service
	out    io.Writer
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

func newAsker(svc api.Service, in io.Reader, out io.Writer, labels map[string]string, multi bool) *asker {
	ctx, cancel := context.WithCancel(context.Background())
	a := &asker{svc: svc, out: out, labels: labels, multi: multi, events: make(chan drover.Event, 64), cancel: cancel}
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
	a.events <- ev
}

// stop ends the asking and waits for it.
func (a *asker) stop() {
	a.cancel()
	a.wg.Wait()
}

func (a *asker) loop(ctx context.Context, lines <-chan string) {
	var queue []question
	var cur *question
	var typed []string        // lines typed ahead of their question (answers piped in with --ask)
	mine := map[string]bool{} // requests answered here: their answer needs no notice
	// answer takes line as the answer to cur; a line typed ahead is shown
	// after its question (a terminal already echoed a line typed at it).
	answer := func(line string, ahead bool) {
		d, ok := parseAnswer(line)
		if !ok {
			fmt.Fprint(a.out, "    answer y, n [MESSAGE] or a(lways): ")
			return
		}
		mine[cur.run+"/"+cur.req.RequestID] = true
		if ahead {
			fmt.Fprintln(a.out, line)
		}
		if _, err := a.svc.Respond(ctx, api.RespondParams{RunID: cur.run, RequestID: cur.req.RequestID, PermissionDecision: d, By: "terminal"}); err != nil {
			fmt.Fprintf(a.out, "    (%v)\n", err)
		}
		cur = nil
	}
	for {
		if cur == nil && len(queue) > 0 {
			cur, queue = &queue[0], queue[1:]
			a.prompt(*cur)
		}
		if cur != nil && len(typed) > 0 {
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
				queue = append(queue, question{ev.RunID, p})
			case drover.PermissionAnswerPayload:
				key := ev.RunID + "/" + p.RequestID
				if cur != nil && cur.run == ev.RunID && cur.req.RequestID == p.RequestID {
					if !mine[key] {
						fmt.Fprintf(a.out, "\n    (answered by %s: %s)\n", answerSource(p), p.Behavior)
					}
					cur = nil
				}
				for i := range queue {
					if queue[i].run == ev.RunID && queue[i].req.RequestID == p.RequestID {
						queue = append(queue[:i], queue[i+1:]...)
						break
					}
				}
			}
		case line, ok := <-lines:
			if !ok {
				lines = nil // stdin closed: the deadline answers the rest
				continue
			}
			if cur == nil {
				typed = append(typed, line)
				continue
			}
			answer(line, false)
		}
	}
}

// prompt asks q.
func (a *asker) prompt(q question) {
	label := ""
	if a.multi {
		label = "[" + a.labels[q.run] + "] "
	}
	wait := ""
	if q.req.Deadline > 0 {
		wait = fmt.Sprintf(", denied in %s without an answer", time.Until(time.UnixMilli(q.req.Deadline)).Round(time.Second))
	}
	exact := ""
	if s := requestSubject(q.req); s != "" {
		exact = label + "    exactly: " + s + "\n"
	}
	fmt.Fprintf(a.out, "%s  ? %s wants to: %s\n%s%s    allow? y(es), n(o) [MESSAGE], a(lways)%s: ",
		label, termtext.Quote(q.req.ToolName), describeRequest(q.req), exact, label, wait)
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
