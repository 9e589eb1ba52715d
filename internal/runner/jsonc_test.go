package runner

import (
	"encoding/json"
	"testing"
)

func TestStripJSONComments(t *testing.T) {
	in := `{
  // the auth type
  "a": "x // not a comment", /* block
  comment */ "b": "\"/*still a string*/",
  "c": 1 /* unterminated`
	got := StripJSONComments([]byte(in))
	if len(got) != len(in) {
		t.Fatalf("length %d, want %d", len(got), len(in))
	}
	var v map[string]any
	if err := json.Unmarshal(append(got, '}'), &v); err != nil {
		t.Fatalf("%v in %q", err, got)
	}
	if v["a"] != "x // not a comment" || v["b"] != `"/*still a string*/` || v["c"] != float64(1) {
		t.Errorf("%v", v)
	}
}
