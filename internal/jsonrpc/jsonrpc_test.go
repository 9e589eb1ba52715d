package jsonrpc

import (
	"encoding/json"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestLines: each builder writes one line of its kind, with "jsonrpc":"2.0"
// unless the dialect is unversioned, no params member for nil params, and
// a null id for a response to a request that had none.
func TestLines(t *testing.T) {
	for _, c := range []struct {
		name string
		got  []byte
		want string
	}{
		{"request", Codec{}.Request(7, "session/new", map[string]any{"cwd": "/ws"}),
			`{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/ws"}}`},
		{"request without params", Codec{}.Request(1, "initialize", nil), `{"jsonrpc":"2.0","id":1,"method":"initialize"}`},
		{"notification", Codec{}.Notification("session/cancel", map[string]string{"sessionId": "s"}),
			`{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}`},
		{"result", Codec{}.Result(json.RawMessage(`"a"`), map[string]any{}), `{"jsonrpc":"2.0","id":"a","result":{}}`},
		{"null result", Codec{}.Result(json.RawMessage(`3`), nil), `{"jsonrpc":"2.0","id":3,"result":null}`},
		{"error", Codec{}.Error(json.RawMessage(`4`), CodeMethodNotFound, "no <such> method"),
			`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no \u003csuch\u003e method"}}`},
		{"error without an id", Codec{}.Error(nil, CodeInvalidParams, "x"), `{"jsonrpc":"2.0","id":null,"error":{"code":-32602,"message":"x"}}`},
		{"unversioned request", Codec{Unversioned: true}.Request(2, "turn/start", map[string]int{"n": 1}), `{"id":2,"method":"turn/start","params":{"n":1}}`},
		{"unversioned notification", Codec{Unversioned: true}.Notification("initialized", nil), `{"method":"initialized"}`},
		{"unversioned result", Codec{Unversioned: true}.Result(json.RawMessage(`5`), true), `{"id":5,"result":true}`},
		{"unversioned error", Codec{Unversioned: true}.Error(json.RawMessage(`6`), CodeInternal, "x"), `{"id":6,"error":{"code":-32603,"message":"x"}}`},
	} {
		if string(c.got) != c.want+"\n" {
			t.Errorf("%s: %q, want %q", c.name, c.got, c.want+"\n")
		}
	}
}

// TestMessage: every line a builder writes decodes back into the Message
// of its kind; an id of null (or none) is no id.
func TestMessage(t *testing.T) {
	decode := func(line []byte) Message {
		t.Helper()
		var m Message
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		return m
	}
	if m := decode(Codec{}.Request(1, "m", []int{1})); !m.HasID() || m.Method != "m" || string(m.Params) != "[1]" {
		t.Errorf("request read as %+v", m)
	}
	if m := decode(Codec{}.Notification("n", nil)); m.HasID() || m.Method != "n" || m.Params != nil {
		t.Errorf("notification read as %+v", m)
	}
	if m := decode(Codec{}.Result(json.RawMessage(`"x"`), 1)); !m.HasID() || m.Method != "" || string(m.Result) != "1" || m.Error != nil {
		t.Errorf("result read as %+v", m)
	}
	if m := decode([]byte(`{"id":9,"error":{"code":429,"message":"slow","data":{"a":1}}}`)); m.Error == nil ||
		m.Error.Code != 429 || m.Error.Message != "slow" || string(m.Error.Data) != `{"a":1}` {
		t.Errorf("error read as %+v", m)
	}
	for id, want := range map[string]bool{``: false, `null`: false, ` null `: false, `0`: true, `""`: true, `"a"`: true} {
		if got := (Message{ID: json.RawMessage(id)}).HasID(); got != want {
			t.Errorf("HasID of id %q = %v, want %v", id, got, want)
		}
	}
}
