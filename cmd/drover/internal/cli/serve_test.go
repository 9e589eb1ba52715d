package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// PRO-1: `drover serve --stdio` answers requests on stdout, keeps going
// after malformed lines, and exits 0 at the end of its input.
func TestPRO1_ServeStdio(t *testing.T) {
	db := filepath.Join(t.TempDir(), "drover.db")
	in := strings.Join([]string{
		`{"id":1,"op":"list"}`,
		`not json`,
		`{"id":2,"op":"get","runId":"run_nope"}`,
		`{"id":3,"op":"run","agent":"nosuch","prompt":"hi"}`,
	}, "\n") + "\n"
	var out, errOut strings.Builder
	if code := Run(context.Background(), []string{"serve", "--stdio", "--db", db}, strings.NewReader(in), &out, &errOut); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r struct {
			ID     json.RawMessage
			Result json.RawMessage
			Error  *struct{ Code string }
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		got[string(r.ID)] = "ok"
		if r.Error != nil {
			got[string(r.ID)] = r.Error.Code
		}
	}
	want := map[string]string{"1": "ok", "null": "INVALID_REQUEST", "2": "NOT_FOUND", "3": "VALIDATION_ERROR"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("id %s: %q, want %q (output %s)", id, got[id], w, out.String())
		}
	}
}
