// Package protocol is drover's client protocol (docs/requirements.md §8, PRO-1, PRO-2):
// JSON objects, one a line, exchanged with a program that drives drover.
//
// A request is {"id":N,"op":"…", …fields of the op}; its response carries
// the same id and either "result" or "error":{"code","message"}. Events of
// subscriptions arrive as {"subscription":"sub_1","event":{…}} with no id.
// docs/protocol.md describes every op with examples.
//
// The ops are the service's (api.Ops, each by its name, with its params as
// the request's fields), plus subscribe and unsubscribe, which carry the
// service's streams. [Server] holds what every connection shares (the
// service, the limits); [Conn] is one JSON-lines connection (decoding,
// concurrency, subscriptions, a bounded outbound queue); [Serve] runs a
// Conn over a reader and a writer (stdio); [ServeNested] one over a run's
// nested-run socket, confined to the run (api.Confine). [Client] is the Go
// side of a connection, an api.Service.
package protocol

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/drover-run/drover/api"
)

// Ops of the protocol besides the service's (api.Ops): a connection's
// subscriptions to the service's streams.
const (
	OpSubscribe   = "subscribe"
	OpUnsubscribe = "unsubscribe"
)

func errorf(code, format string, a ...any) *api.Error { return api.Errorf(code, format, a...) }

// SubscribeParams are the fields of "subscribe": some runs, or all.
type SubscribeParams struct {
	// Runs are followed from AfterSeq (their whole history with 0).
	Runs     []string `json:"runs,omitempty"`
	AfterSeq int64    `json:"afterSeq,omitempty"`
	// All follows every run: without AfterCursor, the runs live now (each
	// from its first event), then a "synced" notice, then every event of
	// every run as it is recorded, each line with its ledger cursor.
	All bool `json:"all,omitempty"`
	// AfterCursor, with All, resumes: every event recorded after that
	// cursor (the "cursor" of the last line received), of every run.
	AfterCursor *int64 `json:"afterCursor,omitempty"`
}

// SubscribeResult is the result of "subscribe".
type SubscribeResult struct {
	Subscription string `json:"subscription"`
}

// UnsubscribeParams are the fields of "unsubscribe".
type UnsubscribeParams struct {
	Subscription string `json:"subscription"`
}

// TypeLagged is the type of the notice a subscription sends when its
// connection could not take events as fast as they came (PRO-2).
const TypeLagged = "lagged"

// Lagged is the event of a lagged notice: delivery of RunID's events
// paused after AfterSeq; the ones after it follow next, read from the
// ledger, with no gap and no duplicate.
// An all-runs subscription's notice has AfterCursor instead of RunID and
// AfterSeq: delivery paused after that cursor.
type Lagged struct {
	Type        string `json:"type"` // "lagged"
	RunID       string `json:"runId,omitempty"`
	AfterSeq    int64  `json:"afterSeq"`
	AfterCursor int64  `json:"afterCursor,omitempty"`
}

// laggedLog is the lagged notice of an all-runs subscription.
type laggedLog struct {
	Type        string `json:"type"`
	AfterCursor int64  `json:"afterCursor"`
}

// TypeSynced is the type of the notice an all-runs subscription sends once
// it has sent the events so far of the runs live when it began.
const TypeSynced = "synced"

// Synced is the event of a synced notice: the live runs were caught up to
// Cursor; resuming after Cursor (AfterCursor) continues from there.
type Synced struct {
	Type   string `json:"type"` // "synced"
	Cursor int64  `json:"cursor"`
}

// response is one response line.
type response struct {
	ID     json.RawMessage `json:"id"`
	Result any             `json:"result,omitempty"`
	Error  *api.Error      `json:"error,omitempty"`
}

// eventLine is a subscription's event line; ev is sent verbatim, with the
// event's ledger cursor when not 0 (all-runs subscriptions).
func eventLine(sub string, cursor int64, ev json.RawMessage) []byte {
	var b bytes.Buffer
	b.Grow(len(ev) + len(sub) + 48)
	b.WriteString(`{"subscription":`)
	s, _ := json.Marshal(sub)
	b.Write(s)
	if cursor > 0 {
		b.WriteString(`,"cursor":`)
		b.WriteString(strconv.FormatInt(cursor, 10))
	}
	b.WriteString(`,"event":`)
	b.Write(ev)
	b.WriteByte('}')
	return b.Bytes()
}
