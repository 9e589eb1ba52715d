package protocol

import (
	"bytes"
	"context"
	"encoding/json"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Conn is one JSON-lines connection over a Server, whatever carries the
// lines: the transport gives it request lines (Handle) and writes the
// lines it produces (Next). Requests run concurrently, so a blocked await
// does not hold up the others; responses may come in any order and carry
// their request's id.
//
// Output goes through one bounded queue. Responses wait for room;
// subscription events never do: a subscription that finds the queue full
// pauses, sends a lagged notice once there is room, and resumes from the
// ledger by seq (PRO-2). A run is never slowed by a reader.
type Conn struct {
	s   *Server
	svc api.Service // the server's, or confined to a run (ServeNested)
	// confined is set on a nested connection (svc is an api.Confined).
	confined bool
	ctx      context.Context // ends in-flight requests and subscriptions
	end      context.CancelFunc
	out      chan []byte
	sem      chan struct{} // bounds requests in flight

	mu      sync.Mutex
	closing bool
	work    sync.WaitGroup // every goroutine or call that may send on out
	quick   sync.WaitGroup // requests other than await: they end on their own
	subs    map[string]*subscription
	nextSub int
	started []string // runs started through this connection

	roomMu sync.Mutex
	room   chan struct{} // closed when the queue is at most a quarter full; nil when nobody waits
}

// NewConn returns a new connection. The transport must call Next until it
// reports the end, even after its writes fail (discarding the lines), and
// call Shutdown once no more requests will come.
func (s *Server) NewConn() *Conn { return s.newConn(s.svc) }

// newConn returns a new connection over svc.
func (s *Server) newConn(svc api.Service) *Conn {
	c := &Conn{s: s, svc: svc, out: make(chan []byte, s.cfg.QueueSize), sem: make(chan struct{}, s.cfg.MaxInFlight),
		subs: map[string]*subscription{}}
	c.ctx, c.end = context.WithCancel(context.Background())
	return c
}

// Next returns the next output line (without its newline), blocking until
// there is one; ok is false once the connection has shut down and every
// line was taken.
func (c *Conn) Next() (line []byte, ok bool) {
	line, ok = <-c.out
	if ok && len(c.out) <= cap(c.out)/4 {
		c.roomMu.Lock()
		if c.room != nil {
			close(c.room)
			c.room = nil
		}
		c.roomMu.Unlock()
	}
	return line, ok
}

// waitRoom blocks until the outbound queue is at most a quarter full: a
// lagging subscription resumes only when it can send a good part of a
// batch, not one event per ledger read.
func (c *Conn) waitRoom(ctx context.Context) bool {
	for {
		c.roomMu.Lock()
		if c.room == nil {
			c.room = make(chan struct{})
		}
		room := c.room
		c.roomMu.Unlock()
		// Checked after taking the channel, so a wake-up is never missed.
		if len(c.out) <= cap(c.out)/4 {
			return true
		}
		select {
		case <-room:
		case <-ctx.Done():
			return false
		}
	}
}

// begin registers one unit of work that may send output; false once the
// connection is shutting down.
func (c *Conn) begin() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return false
	}
	c.work.Add(1)
	return true
}

// respond queues a response, waiting for room: responses are never dropped.
func (c *Conn) respond(id json.RawMessage, result any, err error) {
	r := response{ID: id}
	if err != nil {
		r.Error = api.ErrorOf(err)
		if r.Error.Code == api.CodeInternal || r.Error.Code == api.CodeRunFailed {
			c.s.log.Error("request failed", "code", r.Error.Code, "err", r.Error.Message)
		}
	} else {
		r.Result = result
	}
	line, merr := json.Marshal(r)
	if merr != nil {
		line, _ = json.Marshal(response{ID: id, Error: errorf(api.CodeInternal, "%v", merr)})
	}
	c.out <- line
}

var nullID = json.RawMessage("null")

// Handle executes one request line. Lines that are not requests are
// answered with INVALID_REQUEST at once (id null when it cannot be read);
// a request runs on its own goroutine, and Handle blocks only while the
// connection already has MaxInFlight requests running. Blank lines are
// ignored. After Shutdown began, lines are ignored.
func (c *Conn) Handle(line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		c.handleSync(nullID, errorf(api.CodeInvalidRequest, "not a JSON object: %s", jsonErr(err)))
		return
	}
	id, ok := fields["id"]
	if !ok || !validID(id) {
		c.handleSync(nullID, errorf(api.CodeInvalidRequest, "a request needs an id: a number or a string"))
		return
	}
	var op string
	if err := json.Unmarshal(fields["op"], &op); err != nil || op == "" {
		c.handleSync(id, errorf(api.CodeInvalidRequest, "a request needs an op: a string such as \"run\""))
		return
	}
	delete(fields, "id")
	delete(fields, "op")
	h, ok := c.s.ops[op]
	if !ok {
		c.handleSync(id, errorf(api.CodeInvalidRequest, "unknown op %q (want %s)", op, c.s.opNames()))
		return
	}
	params, _ := json.Marshal(fields)
	// The semaphore is taken before begin, so a connection at its limit
	// stops reading instead of piling up goroutines.
	select {
	case c.sem <- struct{}{}:
	case <-c.ctx.Done():
		return
	}
	blocking := h.blocks
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		<-c.sem
		return
	}
	c.work.Add(1)
	if !blocking {
		c.quick.Add(1)
	}
	c.mu.Unlock()
	// Requests other than await are bounded by the ledger's own latency,
	// so they run to the end even when the connection shuts down; only
	// awaits (and subscriptions) are ended by it.
	ctx := api.WithClient(c.ctx, c.s.cfg.Client)
	if !blocking {
		ctx = context.WithoutCancel(ctx)
	}
	go func() {
		defer c.work.Done()
		if !blocking {
			defer c.quick.Done()
		}
		defer func() { <-c.sem }()
		result, err := h.fn(c, ctx, params)
		c.respond(id, result, err)
		if r, ok := result.(interface{ responded() }); ok {
			r.responded()
		}
	}()
}

// handleSync answers a line that is not a valid request.
func (c *Conn) handleSync(id json.RawMessage, err *api.Error) {
	if !c.begin() {
		return
	}
	defer c.work.Done()
	c.respond(id, nil, err)
}

func jsonErr(err error) string {
	if err == nil {
		return "null"
	}
	return err.Error()
}

func validID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// decode reads an op's fields strictly: unknown fields and wrong types are
// INVALID_REQUEST, so that a typo is not silently ignored.
func decode[T any](params []byte) (T, error) {
	var p T
	dec := json.NewDecoder(bytes.NewReader(params))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return p, errorf(api.CodeInvalidRequest, "%v", err)
	}
	return p, nil
}

// handler is one op as a connection carries it.
type handler struct {
	fn     func(c *Conn, ctx context.Context, params []byte) (any, error)
	blocks bool // it waits (await): Shutdown ends it rather than waiting for it
}

type opFunc = handler

// opsOf are the handlers of ops, and of subscribe and unsubscribe.
func opsOf(ops []api.Op) map[string]handler {
	m := map[string]handler{
		OpSubscribe:   {fn: (*Conn).subscribe},
		OpUnsubscribe: {fn: (*Conn).unsubscribe},
	}
	for _, op := range ops {
		m[op.Name] = handler{blocks: op.Blocks, fn: func(c *Conn, ctx context.Context, params []byte) (any, error) {
			res, err := op.CallJSON(ctx, c.svc, params)
			if started, ok := res.(*runs.Started); ok && err == nil {
				// Remembered: Shutdown cancels the runs of a client
				// that went away.
				c.mu.Lock()
				c.started = append(c.started, started.RunID)
				c.mu.Unlock()
			}
			return res, err
		}}
	}
	return m
}

// opNames lists the ops the server serves, for an error message.
func (s *Server) opNames() string {
	names := slices.Sorted(maps.Keys(s.ops))
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// Shutdown ends the connection once its client has stopped sending (end
// of input). It stops taking requests and lets the ones other than await
// finish; cancels the runs this connection started (a client that went
// away must not leave orphans) and waits for them to be recorded; lets
// awaits and subscriptions go on for up to Config.ShutdownGrace, then
// ends them; and ends the output: Next reports the end once the queued
// lines are taken. Cancelling ctx cuts every wait short (a signal). Other runs are
// not touched. Calling Shutdown again does nothing.
func (c *Conn) Shutdown(ctx context.Context) {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return
	}
	c.closing = true
	c.mu.Unlock()
	c.quick.Wait() // no run op is left half done: every started run is known
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	bg := context.WithoutCancel(ctx)
	for _, id := range started {
		if _, err := c.svc.Cancel(bg, api.RunIDParams{RunID: id}); err != nil {
			c.s.log.Error("closing connection: could not cancel its run", "run", id, "err", err)
		}
	}
	if len(started) > 0 {
		_, _ = c.svc.Await(ctx, api.AwaitParams{Runs: started})
	}
	idle := make(chan struct{})
	var waiter sync.WaitGroup
	waiter.Go(func() {
		c.work.Wait()
		close(idle)
	})
	grace := time.NewTimer(c.s.cfg.ShutdownGrace)
	select {
	case <-idle:
	case <-grace.C:
	case <-ctx.Done():
	}
	grace.Stop()
	c.end()
	waiter.Wait()
	close(c.out)
}

// subscription is one "subscribe": a set of runs followed into the
// connection's queue.
type subscription struct {
	id     string
	ctx    context.Context
	cancel context.CancelFunc
	ready  chan struct{} // closed once the subscribe response is queued
	done   chan struct{} // closed once every follower has ended
}

func (c *Conn) subscribe(ctx context.Context, params []byte) (any, error) {
	p, err := decode[SubscribeParams](params)
	if err != nil {
		return nil, err
	}
	if p.All == (len(p.Runs) > 0) {
		return nil, errorf(api.CodeInvalidRequest, "subscribe needs runs or all:true (one of them)")
	}
	if p.AfterSeq < 0 {
		return nil, errorf(api.CodeValidation, "afterSeq must not be negative")
	}
	from := int64(runs.FromLive)
	if p.AfterCursor != nil {
		if !p.All || *p.AfterCursor < 0 {
			return nil, errorf(api.CodeValidation, "afterCursor goes with all:true and must not be negative")
		}
		from = *p.AfterCursor
	}
	for _, id := range p.Runs {
		if _, err := c.svc.Get(ctx, api.GetParams{RunID: id, RecordOnly: true}); err != nil {
			return nil, err
		}
	}
	if p.All && c.confined {
		return nil, errorf(api.CodeValidation, "a client inside a run follows runs, not all")
	}
	subCtx, cancel := context.WithCancel(c.ctx)
	var log iter.Seq2[store.Event, error]
	if p.All {
		// Taken before the response: from live, FollowAll takes where the
		// log is and which runs are live when called, so every run the
		// client starts once it has the response is followed, however
		// late the subscription's goroutine runs.
		log = c.followAll(subCtx, from)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextSub++
	sub := &subscription{id: "sub_" + strconv.Itoa(c.nextSub), ready: make(chan struct{}), done: make(chan struct{})}
	sub.ctx, sub.cancel = subCtx, cancel
	c.subs[sub.id] = sub
	// The subscription's goroutine is counted in c.work, so Shutdown waits
	// for it before ending the output; it waits for its followers in turn.
	// Adding to c.work is safe even while Shutdown has begun: this handler
	// holds a count of its own until it returns.
	c.work.Add(1)
	go func() {
		defer c.work.Done()
		defer close(sub.done)
		select {
		case <-sub.ready:
		case <-sub.ctx.Done():
			return
		}
		if p.All {
			c.followLog(sub, from, log)
			return
		}
		var followers sync.WaitGroup
		for _, id := range p.Runs {
			followers.Go(func() { c.follow(sub, id, p.AfterSeq) })
		}
		followers.Wait()
	}()
	return &subscribeResult{SubscribeResult{Subscription: sub.id}, sub}, nil
}

// subscribeResult starts its subscription once the response is queued, so
// that the response comes before the first event.
type subscribeResult struct {
	SubscribeResult
	sub *subscription
}

func (r *subscribeResult) responded() { close(r.sub.ready) }

func (c *Conn) unsubscribe(_ context.Context, params []byte) (any, error) {
	p, err := decode[UnsubscribeParams](params)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	sub := c.subs[p.Subscription]
	delete(c.subs, p.Subscription)
	c.mu.Unlock()
	if sub == nil {
		return nil, errorf(api.CodeNotFound, "no subscription %q on this connection", p.Subscription)
	}
	sub.cancel()
	// After the response, no event of the subscription follows.
	<-sub.done
	return struct{}{}, nil
}

// follow sends one run's events after `after` into the queue until the run
// has ended and every event was sent. When the queue is full it stops
// reading, waits for room, sends a lagged notice and resumes from the
// ledger after the last event it sent: no gap, no duplicate, and the run,
// which only appends to the ledger, is never held up.
func (c *Conn) follow(sub *subscription, runID string, after int64) {
	for {
		lagged, failed := false, false
		for ev, err := range runs.Flatten(c.svc.Follow(sub.ctx, api.FollowParams{Runs: []string{runID}, AfterSeq: after})) {
			if err != nil {
				if sub.ctx.Err() == nil {
					c.s.log.Warn("subscription: ledger read failed; retrying", "subscription", sub.id, "run", runID, "after", after, "err", err)
				}
				failed = true
				break
			}
			select {
			case c.out <- eventLine(sub.id, 0, ev.JSON):
				after = ev.Seq
			default:
				lagged = true
			}
			if lagged {
				break
			}
		}
		switch {
		case sub.ctx.Err() != nil:
			return
		case failed:
			// The ledger could not be read: try again shortly, from the
			// same seq, rather than end the subscription silently.
			select {
			case <-time.After(c.s.cfg.Poll):
			case <-sub.ctx.Done():
				return
			}
			continue
		case !lagged:
			return // the run ended and every event was sent
		}
		if !c.waitRoom(sub.ctx) {
			return
		}
		note, _ := json.Marshal(Lagged{Type: TypeLagged, RunID: runID, AfterSeq: after})
		select {
		case c.out <- eventLine(sub.id, 0, note):
		case <-sub.ctx.Done():
			return
		}
	}
}

// followAll is the service's log of all runs from cursor, or from the runs
// live now when cursor is runs.FromLive.
func (c *Conn) followAll(ctx context.Context, cursor int64) iter.Seq2[store.Event, error] {
	var from *int64
	if cursor >= 0 {
		from = &cursor
	}
	return c.svc.FollowAll(ctx, api.FollowAllParams{AfterCursor: from})
}

// followLog sends the ledger's log of all runs (log, then
// api.Service.FollowAll from cursor when it resumes) into the queue,
// each tailed event with its cursor. Catch-up events and the synced
// notice have no cursor to resume from, so they wait for room; a tailed
// event that finds the queue full pauses the subscription, which sends a
// lagged notice once there is room and resumes from the ledger after the
// last cursor sent: no gap, no duplicate, and no run held up.
func (c *Conn) followLog(sub *subscription, cursor int64, log iter.Seq2[store.Event, error]) {
	for ; ; log = nil {
		if log == nil {
			log = c.followAll(sub.ctx, cursor)
		}
		lagged, failed := false, false
		for ev, err := range log {
			if err != nil {
				if sub.ctx.Err() == nil {
					c.s.log.Warn("subscription: ledger read failed; retrying", "subscription", sub.id, "after", cursor, "err", err)
				}
				failed = true
				break
			}
			if ev.Cursor == 0 || ev.RunID == "" {
				line := eventLine(sub.id, 0, ev.JSON)
				if ev.RunID == "" { // the end of the catch-up
					note, _ := json.Marshal(Synced{Type: TypeSynced, Cursor: ev.Cursor})
					line = eventLine(sub.id, 0, note)
				}
				select {
				case c.out <- line:
				case <-sub.ctx.Done():
					return
				}
				if ev.RunID == "" {
					cursor = ev.Cursor
				}
				continue
			}
			select {
			case c.out <- eventLine(sub.id, ev.Cursor, ev.JSON):
				cursor = ev.Cursor
			default:
				lagged = true
			}
			if lagged {
				break
			}
		}
		if sub.ctx.Err() != nil {
			return
		}
		if failed {
			// The ledger could not be read: try again shortly from the
			// same cursor, rather than end the subscription silently.
			select {
			case <-time.After(c.s.cfg.Poll):
			case <-sub.ctx.Done():
				return
			}
			continue
		}
		if !lagged || !c.waitRoom(sub.ctx) {
			return
		}
		note, _ := json.Marshal(laggedLog{Type: TypeLagged, AfterCursor: cursor})
		select {
		case c.out <- eventLine(sub.id, 0, note):
		case <-sub.ctx.Done():
			return
		}
	}
}
