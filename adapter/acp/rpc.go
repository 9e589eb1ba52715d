package acp

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// message is any JSON-RPC line: a request (method and id), a notification
// (method only) or a response (id, and result or error).
type message struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

// JSON-RPC error codes drover answers with.
const (
	codeInvalidParams  = -32602
	codeMethodNotFound = -32601
	codeInternal       = -32603
	// codeNotFound is ACP's "resource not found" (a file that does not
	// exist).
	codeNotFound = -32002
)

// hasID reports whether m carries an id (null is none: JSON-RPC gives a
// response to an unreadable request a null id).
func (m message) hasID() bool {
	id := bytes.TrimSpace(m.ID)
	return len(id) > 0 && !bytes.Equal(id, []byte("null"))
}

// line encodes v as one JSON-RPC line: jsonrpc "2.0" added.
func line(v map[string]any) []byte {
	v["jsonrpc"] = "2.0"
	b, err := json.Marshal(v)
	if err != nil {
		// Only drover's own values are encoded; one that does not encode is
		// a programming error.
		panic(fmt.Sprintf("acp: encode JSON-RPC message: %v", err))
	}
	return append(b, '\n')
}

// result returns the line answering the agent's request id with res.
func result(id json.RawMessage, res any) []byte {
	return line(map[string]any{"id": id, "result": res})
}

// failure returns the line refusing the agent's request id.
func failure(id json.RawMessage, code int, msg string) []byte {
	return line(map[string]any{"id": id, "error": map[string]any{"code": code, "message": msg}})
}

// notification returns a notification line.
func notification(method string, params any) []byte {
	return line(map[string]any{"method": method, "params": params})
}
