package protocol

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"strconv"
	"sync"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/store"
)

// ErrClientClosed is returned by calls on a closed Client, and by calls in
// flight when the connection ends.
var ErrClientClosed = errors.New("protocol client closed")

// Client speaks the protocol to a server (`drover serve --stdio` or a Conn)
// over a pair of streams. Its methods are safe for concurrent use: calls
// are multiplexed by request id. Close stops its goroutine.
type Client struct {
	api.Remote // the service's operations, through Call
	w          io.WriteCloser
	r          io.Reader
	wmu        sync.Mutex    // serializes request lines
	done       chan struct{} // closed when the reader has ended
	quit       chan struct{} // closed by Close
	wg         sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	err     error // why the connection ended
	nextID  int64
	pending map[int64]*call
	subs    map[string]*Subscription
}

// reply is a response as the client reads it.
type reply struct {
	Result json.RawMessage
	Error  *api.Error
}

type call struct {
	res       chan reply
	subscribe bool // the reader registers the subscription before the next line
	sub       *Subscription
}

// Dial returns a client over rwc (a connection to a server).
func Dial(rwc io.ReadWriteCloser) *Client { return NewClient(rwc, rwc) }

// NewClient returns a client that reads the server's lines from r and
// writes requests to w, e.g. a child process's stdout and stdin. Close
// closes w (the server sees the end of its input and cancels the runs
// this connection started) and r, if it is an io.Closer.
func NewClient(r io.Reader, w io.WriteCloser) *Client {
	c := &Client{w: w, r: r, done: make(chan struct{}), quit: make(chan struct{}), pending: map[int64]*call{}, subs: map[string]*Subscription{}}
	c.Caller = c
	c.wg.Go(c.read)
	return c
}

// read dispatches the server's lines until r ends.
func (c *Client) read() {
	br := bufio.NewReaderSize(c.r, 64<<10)
	var err error
	for {
		var line []byte
		line, err = readFull(br)
		if len(bytes.TrimSpace(line)) > 0 {
			c.dispatch(line)
		}
		if err != nil {
			break
		}
	}
	c.mu.Lock()
	if c.err == nil {
		c.err = fmt.Errorf("%w: %v", ErrClientClosed, err)
	}
	pending, subs := c.pending, c.subs
	c.pending, c.subs = map[int64]*call{}, map[string]*Subscription{}
	c.mu.Unlock()
	for _, p := range pending {
		close(p.res)
	}
	for _, s := range subs {
		s.finish()
	}
	close(c.done)
}

func readFull(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if !errors.Is(err, bufio.ErrBufferFull) {
			return line, err
		}
	}
}

// dispatch routes one line: a response to its call, an event to its
// subscription.
func (c *Client) dispatch(line []byte) {
	var msg struct {
		ID           json.RawMessage `json:"id"`
		Result       json.RawMessage `json:"result"`
		Error        *api.Error      `json:"error"`
		Subscription string          `json:"subscription"`
		Cursor       int64           `json:"cursor"`
		Event        json.RawMessage `json:"event"`
	}
	if json.Unmarshal(line, &msg) != nil {
		return
	}
	if msg.Event != nil {
		c.mu.Lock()
		s := c.subs[msg.Subscription]
		c.mu.Unlock()
		if s != nil {
			s.push(msg.Event, msg.Cursor)
		}
		return
	}
	id, err := strconv.ParseInt(string(msg.ID), 10, 64)
	if err != nil {
		return // an error about a line the server could not read; nothing waits for it
	}
	c.mu.Lock()
	p := c.pending[id]
	delete(c.pending, id)
	if p != nil && p.subscribe && msg.Error == nil {
		var r SubscribeResult
		if json.Unmarshal(msg.Result, &r) == nil && r.Subscription != "" {
			p.sub = newSubscription(c, r.Subscription)
			c.subs[r.Subscription] = p.sub
		}
	}
	c.mu.Unlock()
	if p != nil {
		p.res <- reply{Result: msg.Result, Error: msg.Error}
	}
}

// do sends one request and waits for its response, decoding the result
// into out (unless nil). The server's refusal is an *api.Error.
func (c *Client) do(ctx context.Context, op string, params, out any) error {
	_, err := c.doCall(ctx, op, params, out, false)
	return err
}

func (c *Client) doCall(ctx context.Context, op string, params, out any, subscribe bool) (*call, error) {
	body, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	if c.closed || c.err != nil {
		err := c.err
		c.mu.Unlock()
		if err == nil {
			err = ErrClientClosed
		}
		return nil, err
	}
	c.nextID++
	id := c.nextID
	p := &call{res: make(chan reply, 1), subscribe: subscribe}
	c.pending[id] = p
	c.mu.Unlock()
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"id":%d,"op":%q`, id, op)
	if len(body) > 2 {
		b.WriteByte(',')
		b.Write(body[1:])
	} else {
		b.WriteByte('}')
	}
	b.WriteByte('\n')
	c.wmu.Lock()
	_, err = c.w.Write(b.Bytes())
	c.wmu.Unlock()
	if err != nil {
		c.forget(id)
		return nil, fmt.Errorf("send %s: %w", op, err)
	}
	select {
	case res, ok := <-p.res:
		if !ok {
			c.mu.Lock()
			err := c.err
			c.mu.Unlock()
			return nil, err
		}
		if res.Error != nil {
			return p, res.Error
		}
		if out != nil {
			if err := json.Unmarshal(res.Result, out); err != nil {
				return p, fmt.Errorf("decode %s result: %w", op, err)
			}
		}
		return p, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

func (c *Client) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

var _ api.Service = (*Client)(nil)

// Call sends op with params and decodes its result into result: the
// service's request/response operations go through it (api.Remote).
func (c *Client) Call(ctx context.Context, op string, params, result any) error {
	return c.do(ctx, op, params, result)
}

// Follow implements api.Service with a subscription to p.Runs: the
// subscription's lagged notices are the server's (the events after them
// follow), and it ends once every run's done event has come.
func (c *Client) Follow(ctx context.Context, p api.FollowParams) iter.Seq2[[]store.Event, error] {
	return func(yield func([]store.Event, error) bool) {
		sub, err := c.Subscribe(ctx, SubscribeParams{Runs: p.Runs, AfterSeq: p.AfterSeq})
		if err != nil {
			yield(nil, err)
			return
		}
		defer func() { _ = sub.Unsubscribe(context.WithoutCancel(ctx)) }()
		open := map[string]bool{}
		for _, id := range p.Runs {
			open[id] = true
		}
		for len(open) > 0 {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					yield(nil, fmt.Errorf("follow: %w", ErrClientClosed))
					return
				}
				if ev.Lagged != nil {
					continue
				}
				if ev.Event.Type == drover.TypeDone {
					delete(open, ev.Event.RunID)
				}
				if !yield([]store.Event{stored(ev)}, nil) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// FollowAll implements api.Service with a subscription to all runs.
func (c *Client) FollowAll(ctx context.Context, p api.FollowAllParams) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		sub, err := c.Subscribe(ctx, SubscribeParams{All: true, AfterCursor: p.AfterCursor})
		if err != nil {
			yield(store.Event{}, err)
			return
		}
		defer func() { _ = sub.Unsubscribe(context.WithoutCancel(ctx)) }()
		for {
			select {
			case ev, ok := <-sub.Events():
				if !ok {
					yield(store.Event{}, fmt.Errorf("follow all: %w", ErrClientClosed))
					return
				}
				var se store.Event
				switch {
				case ev.Lagged != nil:
					continue
				case ev.Synced != nil:
					se = store.Event{Cursor: ev.Synced.Cursor}
				default:
					se = stored(ev)
				}
				if !yield(se, nil) {
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}
}

// WatchRuns implements api.Service: the protocol has no such stream (the
// HTTP API has: server.Client).
func (c *Client) WatchRuns(context.Context, api.WatchParams) iter.Seq2[[]store.Run, error] {
	return func(yield func([]store.Run, error) bool) {
		yield(nil, errorf(api.CodeInvalidRequest, "watching runs is not an op of the JSON-lines protocol: use the HTTP API (GET /v1/runs/stream)"))
	}
}

// stored is a subscription's event as the ledger holds it.
func stored(ev Event) store.Event {
	return store.Event{RunID: ev.Event.RunID, Seq: ev.Event.Seq, Cursor: ev.Cursor, Type: ev.Event.Type, JSON: ev.Raw}
}

// Subscribe follows runs (or all runs); their events arrive on the
// subscription's channel.
func (c *Client) Subscribe(ctx context.Context, p SubscribeParams) (*Subscription, error) {
	var r SubscribeResult
	call, err := c.doCall(ctx, OpSubscribe, p, &r, true)
	if err != nil {
		return nil, err
	}
	if call.sub == nil {
		return nil, fmt.Errorf("subscribe: the server sent no subscription id")
	}
	return call.sub, nil
}

// Close closes the connection: the server cancels the runs this
// connection started. Calls in flight return ErrClientClosed, and every
// subscription's channel is closed. Close waits for the client's
// goroutines; closing again does nothing.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		<-c.done
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	close(c.quit)
	err := c.w.Close()
	if rc, ok := c.r.(io.Closer); ok {
		_ = rc.Close()
	}
	c.wg.Wait()
	return err
}

// Event is one line of a subscription: a UES event, or a lagged notice.
type Event struct {
	// Event is the UES event, with RunID and Seq (zero for a notice).
	Event drover.Event
	// Raw is the event object exactly as sent.
	Raw json.RawMessage
	// Lagged is set for a lagged notice: the events of Lagged.RunID after
	// Lagged.AfterSeq (of all runs after Lagged.AfterCursor) follow, read
	// from the ledger.
	Lagged *Lagged
	// Synced is set for the notice of an all-runs subscription that the
	// runs live when it began are caught up.
	Synced *Synced
	// Cursor is the event's ledger cursor in an all-runs subscription (0
	// for catch-up events and notices): subscribe again with AfterCursor
	// set to the last one to resume.
	Cursor int64
}

// Subscription is one subscription of a Client.
type Subscription struct {
	c  *Client
	id string
	ch chan Event

	stop     chan struct{}
	stopOnce sync.Once

	mu    sync.Mutex
	queue []received
	wake  chan struct{}
	ended bool
}

func newSubscription(c *Client, id string) *Subscription {
	s := &Subscription{c: c, id: id, ch: make(chan Event), wake: make(chan struct{}, 1), stop: make(chan struct{})}
	// The pump is owned by the client: it ends when the subscription ends
	// (Unsubscribe, or the connection closing) and Close waits for it. It
	// queues without bound, so a slow reader of this channel never holds
	// up the client's other calls.
	c.wg.Go(s.pump)
	return s
}

// ID is the server's subscription id.
func (s *Subscription) ID() string { return s.id }

// Events returns the subscription's events, in order per run. The channel
// is closed after Unsubscribe or when the client closes.
func (s *Subscription) Events() <-chan Event { return s.ch }

// received is one event line of a subscription.
type received struct {
	raw    json.RawMessage
	cursor int64
}

func (s *Subscription) push(raw json.RawMessage, cursor int64) {
	s.mu.Lock()
	s.queue = append(s.queue, received{raw, cursor})
	s.mu.Unlock()
	s.poke()
}

func (s *Subscription) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// finish ends the subscription once the events already received are
// delivered (the connection ended).
func (s *Subscription) finish() {
	s.mu.Lock()
	s.ended = true
	s.mu.Unlock()
	s.poke()
}

// stopNow ends the subscription at once, dropping undelivered events.
func (s *Subscription) stopNow() { s.stopOnce.Do(func() { close(s.stop) }) }

func (s *Subscription) pump() {
	defer close(s.ch)
	for {
		s.mu.Lock()
		q, ended := s.queue, s.ended
		s.queue = nil
		s.mu.Unlock()
		for _, rc := range q {
			raw := rc.raw
			ev := Event{Raw: raw, Cursor: rc.cursor}
			var head struct {
				Type string `json:"type"`
			}
			_ = json.Unmarshal(raw, &head)
			switch head.Type {
			case TypeLagged:
				var l Lagged
				_ = json.Unmarshal(raw, &l)
				ev.Lagged = &l
			case TypeSynced:
				var sy Synced
				_ = json.Unmarshal(raw, &sy)
				ev.Synced = &sy
			default:
				if err := json.Unmarshal(raw, &ev.Event); err != nil {
					continue
				}
			}
			select {
			case s.ch <- ev:
			case <-s.stop:
				return
			case <-s.c.quit:
				return
			}
		}
		if ended {
			return
		}
		select {
		case <-s.wake:
		case <-s.stop:
			return
		case <-s.c.quit:
			return
		}
	}
}

// Unsubscribe ends the subscription: no event follows, and the channel is
// closed. Unsubscribing twice is a NOT_FOUND error.
func (s *Subscription) Unsubscribe(ctx context.Context) error {
	err := s.c.do(ctx, OpUnsubscribe, UnsubscribeParams{Subscription: s.id}, nil)
	s.c.mu.Lock()
	delete(s.c.subs, s.id)
	s.c.mu.Unlock()
	s.stopNow()
	return err
}
