// Package jsonrpc is JSON-RPC 2.0 over lines, as drover speaks it with a
// vendor on stdio (ACP agents, Codex's app-server) and as drover's test
// peers answer: the message any line decodes into, and the lines of a
// request, a result, an error and a notification. The adapters' fast
// paths (internal/jsonscan) read their one frequent shape of line
// themselves and leave every other line to a decode into Message.
package jsonrpc

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Message is any JSON-RPC line: a request (method and id), a notification
// (method only) or a response (id, and result or error). Its member
// names are what a fast path that reads a line itself must not skip
// (jsonscan.FieldsOf).
type Message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *Error          `json:"error,omitempty"`
}

// Error is a JSON-RPC error object.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// Error codes of the JSON-RPC specification drover answers with.
const (
	CodeMethodNotFound = -32601
	CodeInvalidParams  = -32602
	CodeInternal       = -32603
)

// HasID reports whether m carries an id. null is none: JSON-RPC answers
// a request it could not read with a null id.
func (m Message) HasID() bool {
	id := bytes.TrimSpace(m.ID)
	return len(id) > 0 && !bytes.Equal(id, []byte("null"))
}

// Codec writes the lines of one peer's dialect of JSON-RPC 2.0. The zero
// value writes the standard's lines, each with "jsonrpc":"2.0".
type Codec struct {
	// Unversioned leaves the "jsonrpc" member out, for a peer that speaks
	// JSON-RPC 2.0 without it (Codex's app-server).
	Unversioned bool
}

// The lines' members, in the order they are written.
type (
	request struct {
		Version string `json:"jsonrpc,omitempty"`
		ID      int    `json:"id"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}
	notification struct {
		Version string `json:"jsonrpc,omitempty"`
		Method  string `json:"method"`
		Params  any    `json:"params,omitempty"`
	}
	result struct {
		Version string          `json:"jsonrpc,omitempty"`
		ID      json.RawMessage `json:"id"`
		Result  any             `json:"result"`
	}
	failure struct {
		Version string          `json:"jsonrpc,omitempty"`
		ID      json.RawMessage `json:"id"`
		Error   Error           `json:"error"`
	}
)

func (c Codec) version() string {
	if c.Unversioned {
		return ""
	}
	return "2.0"
}

// Request returns the line of a request: id, method and params (nil: no
// params member).
func (c Codec) Request(id int, method string, params any) []byte {
	return encode(request{Version: c.version(), ID: id, Method: method, Params: params})
}

// Notification returns the line of a notification (params nil: no params
// member).
func (c Codec) Notification(method string, params any) []byte {
	return encode(notification{Version: c.version(), Method: method, Params: params})
}

// Result returns the line answering the request id with res (nil:
// null).
func (c Codec) Result(id json.RawMessage, res any) []byte {
	return encode(result{Version: c.version(), ID: nullIfEmpty(id), Result: res})
}

// Error returns the line refusing the request id with code and msg.
func (c Codec) Error(id json.RawMessage, code int, msg string) []byte {
	return encode(failure{Version: c.version(), ID: nullIfEmpty(id), Error: Error{Code: code, Message: msg}})
}

// nullIfEmpty is id, or null for none: a response's id member is
// required, and an empty RawMessage does not encode.
func nullIfEmpty(id json.RawMessage) json.RawMessage {
	if len(id) == 0 {
		return json.RawMessage("null")
	}
	return id
}

// encode is v as one line. Only drover's own values are encoded, so one
// that does not encode is a programming error.
func encode(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("jsonrpc: encode %T: %v", v, err))
	}
	return append(b, '\n')
}
