package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/internal/fanin"
	"github.com/drover-run/drover/store"
)

// Client is api.Service over the HTTP API of a `drover serve` (API-2):
// each operation is a request to its route (api.Ops), each stream an SSE
// stream. Its errors are *api.Error: the server's as it sent them; a
// server that cannot be reached, refuses the token or speaks another
// version of the API is an error of its own (see Connect). It is safe for
// concurrent use.
type Client struct {
	api.Remote // the service's operations, through Call
	base       *url.URL
	token      string
	hc         *http.Client

	once    sync.Once
	infoErr error
}

var _ api.Service = (*Client)(nil)

// NewClient returns a client of the server at baseURL (http://host:port),
// sending token as its bearer token when not empty.
func NewClient(baseURL, token string) (*Client, error) {
	u, err := url.Parse(strings.TrimSuffix(baseURL, "/"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("server %q: want a URL such as http://127.0.0.1:8765", baseURL)
	}
	c := &Client{base: u, token: token, hc: &http.Client{}}
	c.Caller = c
	return c, nil
}

// Connect checks, once, that the server answers, takes the token and
// speaks this version of the API (api.Version): the first operation of a
// client calls it. Its error says which of those failed, in a line.
func (c *Client) Connect(ctx context.Context) error {
	c.once.Do(func() {
		var info *api.Info
		err := c.do(ctx, http.MethodGet, "/v1/info", nil, &info)
		var e *api.Error
		switch {
		case errors.As(err, &e) && e.Code == CodeUnauthorized:
			c.infoErr = api.Errorf(CodeUnauthorized, "the drover server at %s refused the token (set DROVER_TOKEN to the token it printed)", c.base.Redacted())
		case errors.As(err, &e) && e.Code == api.CodeNotFound:
			c.infoErr = api.Errorf(api.CodeIncompatible, "%s is not a drover server of API version %d (GET /v1/info: not found): upgrade it", c.base.Redacted(), api.Version)
		case err != nil:
			c.infoErr = err
		case info.API != api.Version:
			c.infoErr = api.Errorf(api.CodeIncompatible, "the drover server at %s speaks API version %d (drover %s); this drover speaks %d: run the same version on both sides",
				c.base.Redacted(), info.API, info.Drover, api.Version)
		}
	})
	return c.infoErr
}

// unreachable is the error of a server that did not answer.
func (c *Client) unreachable(err error) error {
	return api.Errorf(CodeUnreachable, "cannot reach the drover server at %s: %v", c.base.Redacted(), err)
}

// CodeUnreachable is the code of a Client's error when the server did not
// answer at all.
const CodeUnreachable = "UNREACHABLE"

// do sends one request and decodes its JSON answer into out (unless nil):
// a 2xx answer as out, any other as an *api.Error.
func (c *Client) do(ctx context.Context, method, path string, body any, out any) error {
	_, data, err := c.roundTrip(ctx, method, path, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return api.Errorf(api.CodeInternal, "decode the answer to %s %s: %v", method, path, err)
	}
	return nil
}

// roundTrip sends one request and reads its whole answer: a 2xx answer's
// header and body, any other as an *api.Error.
func (c *Client) roundTrip(ctx context.Context, method, path string, body any) (http.Header, []byte, error) {
	resp, err := c.send(ctx, method, path, body, "")
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, c.unreachable(err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, nil, c.errorOf(resp, data)
	}
	return resp.Header, data, nil
}

// send sends one request; body is JSON-encoded unless nil.
func (c *Client) send(ctx context.Context, method, path string, body any, lastEventID string) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base.String()+path, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if lastEventID != "" {
		req.Header.Set("Last-Event-ID", lastEventID)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, c.unreachable(err)
	}
	return resp, nil
}

// errorOf is a non-2xx answer as an *api.Error: the server's error body,
// or, for one that is not drover's, the status.
func (c *Client) errorOf(resp *http.Response, data []byte) error {
	var b errorBody
	if json.Unmarshal(data, &b) == nil && b.Error != nil && b.Error.Code != "" {
		return b.Error
	}
	code := api.CodeInternal
	switch resp.StatusCode {
	case http.StatusNotFound:
		code = api.CodeNotFound
	case http.StatusUnauthorized:
		code = CodeUnauthorized
	}
	return api.Errorf(code, "%s %s: %s", resp.Request.Method, resp.Request.URL.Path, resp.Status)
}

// Call performs the op named name with params p at its route, decoding
// its result into result: the service's request/response operations go
// through it (api.Remote). The first call checks the server (Connect).
func (c *Client) Call(ctx context.Context, name string, p, result any) error {
	if err := c.Connect(ctx); err != nil {
		return err
	}
	op, ok := api.Lookup(name)
	if !ok {
		return api.Errorf(api.CodeInvalidRequest, "unknown op %q", name)
	}
	method, path, err := route(op, p)
	if err != nil {
		return err
	}
	var body any
	wildcards := wildcardsOf(path)
	path = fillWildcards(path, p)
	if method == http.MethodGet {
		if q := encodeQuery(p, wildcards).Encode(); q != "" {
			path += "?" + q
		}
	} else {
		body = p
	}
	sh, shaped := shapes[name]
	if !shaped || sh.read == nil {
		return c.do(ctx, method, path, body, result)
	}
	header, data, err := c.roundTrip(ctx, method, path, body)
	if err != nil {
		return err
	}
	return sh.read(header, data, result)
}

// route picks the route of op whose wildcards p fills: "GET",
// "/v1/runs/{runId}".
func route(op api.Op, p any) (method, path string, err error) {
	for _, rt := range op.Routes {
		method, path, _ := strings.Cut(rt, " ")
		filled := true
		for _, w := range wildcardsOf(path) {
			filled = filled && fieldOf(p, w) != ""
		}
		if filled {
			return method, path, nil
		}
	}
	return "", "", api.Errorf(api.CodeInvalidRequest, "%s: its params name no run (or session) to act on", op.Name)
}

// fillWildcards puts p's fields in path's wildcards, escaped.
func fillWildcards(path string, p any) string {
	for _, w := range wildcardsOf(path) {
		path = strings.Replace(path, "{"+w+"}", url.PathEscape(fieldOf(p, w)), 1)
	}
	return path
}

// Await implements api.Service: the server waits for one run per request,
// so several are awaited in turn.
func (c *Client) Await(ctx context.Context, p api.AwaitParams) (*api.RunsResult, error) {
	ids := p.Runs
	if p.RunID != "" {
		ids = append([]string{p.RunID}, ids...)
	}
	if len(ids) == 0 {
		return nil, api.Errorf(api.CodeInvalidRequest, "await needs runId or runs")
	}
	out := &api.RunsResult{Runs: []store.Run{}}
	for _, id := range ids {
		r, err := c.Remote.Await(ctx, api.AwaitParams{RunID: id})
		if err != nil {
			return nil, err
		}
		out.Runs = append(out.Runs, r.Runs...)
	}
	return out, nil
}

// streamRetries is how many times in a row a stream whose connection
// broke is taken up again (from its last id) before the error is yielded.
const streamRetries = 5

// sseEvent is one event of an SSE stream.
type sseEvent struct {
	id, typ string
	data    []byte
}

// stream yields the events of the SSE stream at path, from after
// lastEventID; a connection that breaks is taken up again from the last
// id received (up to streamRetries times in a row). It ends when the
// server ends the stream, with an error, or when ctx ends.
func (c *Client) stream(ctx context.Context, path, lastEventID string) iter.Seq2[sseEvent, error] {
	return func(yield func(sseEvent, error) bool) {
		if err := c.Connect(ctx); err != nil {
			yield(sseEvent{}, err)
			return
		}
		for tries := 0; ; tries++ {
			resp, err := c.send(ctx, http.MethodGet, path, nil, lastEventID)
			if err != nil {
				if ctx.Err() == nil && tries < streamRetries {
					select {
					case <-time.After(time.Duration(tries+1) * 100 * time.Millisecond):
						continue
					case <-ctx.Done():
						return
					}
				}
				if ctx.Err() == nil {
					yield(sseEvent{}, err)
				}
				return
			}
			if resp.StatusCode/100 != 2 {
				data, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				yield(sseEvent{}, c.errorOf(resp, data))
				return
			}
			ended, err := readSSE(resp.Body, func(ev sseEvent) bool {
				if ev.id != "" {
					lastEventID = ev.id
				}
				tries = 0
				return yield(ev, nil)
			})
			resp.Body.Close()
			switch {
			case ended:
				return
			case ctx.Err() != nil:
				return
			case err == nil:
				return // the consumer stopped
			case tries >= streamRetries:
				yield(sseEvent{}, c.unreachable(err))
				return
			}
		}
	}
}

// readSSE reads events from r, handing each to f until f returns false
// (nil error, ended false) or the stream ends: cleanly (ended) or with a
// read error.
func readSSE(r io.Reader, f func(sseEvent) bool) (ended bool, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev sseEvent
	var data [][]byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			if errors.Is(err, io.EOF) && len(line) == 0 {
				return true, nil
			}
			return false, err
		}
		line = bytes.TrimSuffix(bytes.TrimSuffix(line, []byte("\n")), []byte("\r"))
		switch {
		case len(line) == 0:
			if ev.typ != "" || len(data) > 0 {
				ev.data = bytes.Join(data, []byte("\n"))
				if !f(ev) {
					return false, nil
				}
			}
			ev, data = sseEvent{}, nil
		case line[0] == ':': // a comment: the heartbeat
		default:
			k, v, _ := bytes.Cut(line, []byte(":"))
			v = bytes.TrimPrefix(v, []byte(" "))
			switch string(k) {
			case "id":
				ev.id = string(v)
			case "event":
				ev.typ = string(v)
			case "data":
				data = append(data, append([]byte(nil), v...))
			}
		}
	}
}

// Follow implements api.Service: one SSE stream per run (GET
// /v1/runs/{runId}/stream), merged; each event is a batch of its own.
func (c *Client) Follow(ctx context.Context, p api.FollowParams) iter.Seq2[[]store.Event, error] {
	after := ""
	if p.AfterSeq > 0 {
		after = strconv.FormatInt(p.AfterSeq, 10)
	}
	streams := make([]func(context.Context) iter.Seq2[[]store.Event, error], len(p.Runs))
	for i, id := range p.Runs {
		streams[i] = func(ctx context.Context) iter.Seq2[[]store.Event, error] {
			return func(yield func([]store.Event, error) bool) {
				for ev, err := range c.stream(ctx, "/v1/runs/"+url.PathEscape(id)+"/stream", after) {
					if err != nil {
						yield(nil, err)
						return
					}
					seq, _ := strconv.ParseInt(ev.id, 10, 64)
					if !yield([]store.Event{{RunID: id, Seq: seq, Type: drover.EventType(ev.typ), JSON: ev.data}}, nil) {
						return
					}
				}
			}
		}
	}
	return func(yield func([]store.Event, error) bool) {
		for evs, err := range fanin.Merge(ctx, streams...) {
			if !yield(evs, err) || err != nil {
				return
			}
		}
	}
}

// FollowAll implements api.Service: GET /v1/stream.
func (c *Client) FollowAll(ctx context.Context, p api.FollowAllParams) iter.Seq2[store.Event, error] {
	return func(yield func(store.Event, error) bool) {
		after := ""
		if p.AfterCursor != nil {
			after = strconv.FormatInt(*p.AfterCursor, 10)
		}
		for ev, err := range c.stream(ctx, "/v1/stream", after) {
			if err != nil {
				yield(store.Event{}, err)
				return
			}
			cursor, _ := strconv.ParseInt(ev.id, 10, 64)
			se := store.Event{Cursor: cursor}
			if ev.typ != "synced" {
				var head struct {
					RunID string `json:"runId"`
					Seq   int64  `json:"seq"`
				}
				_ = json.Unmarshal(ev.data, &head)
				se = store.Event{RunID: head.RunID, Seq: head.Seq, Cursor: cursor, Type: drover.EventType(ev.typ), JSON: ev.data}
			}
			if !yield(se, nil) {
				return
			}
		}
	}
}

// WatchRuns implements api.Service: GET /v1/runs/stream. The records
// before "synced" are the first batch; each later record a batch of its
// own.
func (c *Client) WatchRuns(ctx context.Context, p api.WatchParams) iter.Seq2[[]store.Run, error] {
	return func(yield func([]store.Run, error) bool) {
		path := "/v1/runs/stream"
		if p.Limit > 0 {
			path += "?limit=" + strconv.Itoa(p.Limit)
		}
		var first []store.Run
		synced := false
		for ev, err := range c.stream(ctx, path, "") {
			if err != nil {
				yield(nil, err)
				return
			}
			if ev.typ == "synced" {
				synced = true
				if !yield(first, nil) {
					return
				}
				continue
			}
			var r store.Run
			if err := json.Unmarshal(ev.data, &r); err != nil {
				yield(nil, api.Errorf(api.CodeInternal, "a run record: %v", err))
				return
			}
			if !synced {
				first = append(first, r)
			} else if !yield([]store.Run{r}, nil) {
				return
			}
		}
	}
}
