package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/drover-run/drover"
)

func TestStatusRules_Shared(t *testing.T) {
	var r StatusRules
	for status, want := range map[int]drover.ErrorCode{
		0: drover.CodeModelError, 404: drover.CodeModelError, 413: drover.CodeModelError,
		429: drover.CodeRateLimited, 529: drover.CodeOverloaded, 401: drover.CodeAuthFailed, 403: drover.CodeAuthFailed,
		400: drover.CodeBadRequest, 500: drover.CodeServerError, 503: drover.CodeServerError, 1200: drover.CodeServerError,
	} {
		if got := r.Code(status, "context"); got != want {
			t.Errorf("%d: %s, want %s", status, got, want)
		}
	}
}

func TestStatusRules_Differences(t *testing.T) {
	r := StatusRules{
		FoldCase:        true,
		Overloaded:      []Match{{Status: []int{503}, Texts: []Text{{"overload"}}}},
		ContextOverflow: []Match{{Texts: []Text{{"maximum", "token"}}}},
		BadRequest:      []Match{{From: 400, To: 499}},
		ServerError:     []Match{{Texts: []Text{{"high demand"}}}},
	}
	cases := []struct {
		status int
		msg    string
		want   drover.ErrorCode
	}{
		{503, "Overloaded", drover.CodeOverloaded},
		{503, "down", drover.CodeServerError},
		{400, "Maximum of 8 TOKENS", drover.CodeContextOverflow},
		{500, "token maximum", drover.CodeContextOverflow}, // the order: before SERVER_ERROR
		{400, "maximum", drover.CodeBadRequest},
		{404, "", drover.CodeBadRequest},
		{429, "maximum token", drover.CodeRateLimited}, // the order: before CONTEXT_OVERFLOW
		{0, "high demand", drover.CodeServerError},
		{0, "", drover.CodeModelError},
	}
	for _, c := range cases {
		if got := r.Code(c.status, c.msg); got != c.want {
			t.Errorf("%d %q: %s, want %s", c.status, c.msg, got, c.want)
		}
	}
	exact := StatusRules{ContextOverflow: []Match{{Status: []int{400}, Texts: []Text{{"context"}}}}}
	if got := exact.Code(400, "Context"); got != drover.CodeBadRequest {
		t.Errorf("without FoldCase a text matches exactly: %s", got)
	}
}

func TestStampAndToolCalls(t *testing.T) {
	at := time.UnixMilli(1000)
	s := Stamp{Agent: "x", SessionID: "s", Now: func() time.Time { return at }}
	raw := []byte(`{"a":1}`)
	ev := s.Extension("thing", raw)
	raw[1] = 'b'
	if ev.Type != "x:thing" || ev.Agent != "x" || ev.SessionID != "s" || ev.Timestamp != 1000 || string(ev.Payload.(json.RawMessage)) != `{"a":1}` {
		t.Fatalf("extension %+v", ev)
	}
	if m := s.Failure(drover.CodeRateLimited, "m", map[string]any{}).Metadata; m["retryable"] != true {
		t.Errorf("failure metadata %v", m)
	}
	if m := s.Failure(drover.CodeRateLimited, "m", map[string]any{"retryable": false}).Metadata; m["retryable"] != false {
		t.Errorf("the vendor's retryable was overridden: %v", m)
	}
	var c ToolCalls
	c.Start("a", "bash", at)
	c.Start("b", "read", time.Time{})
	if p := c.Result("a", drover.ToolSuccess, "ok", at.Add(1500*time.Millisecond)); p.ToolName != "bash" || p.DurationMs == nil || *p.DurationMs != 1500 {
		t.Errorf("result %+v", p)
	}
	if p := c.Result("a", drover.ToolSuccess, "", at.Add(-time.Second)); *p.DurationMs != 0 {
		t.Errorf("negative duration %d", *p.DurationMs)
	}
	if p := c.Result("b", drover.ToolDenied, "", at); p.DurationMs != nil || !c.Known("b") || c.Known("c") {
		t.Errorf("unknown start: %+v", p)
	}
	if p := c.Result("c", drover.ToolError, "", at); p.ToolName != "" || p.DurationMs != nil {
		t.Errorf("unknown call: %+v", p)
	}
}

func TestAddOptional(t *testing.T) {
	var sum *int64
	AddOptional(&sum, nil)
	if sum != nil {
		t.Fatal("a nil value made the sum present")
	}
	two := int64(2)
	AddOptional(&sum, &two)
	AddOptional(&sum, &two)
	if *sum != 4 || two != 2 {
		t.Fatalf("sum %d, value %d", *sum, two)
	}
}

func TestCopyIfAbsent(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	if err := CopyIfAbsent(src, dst); err != nil || exists(dst) {
		t.Fatalf("missing source: %v, dst exists %v", err, exists(dst))
	}
	os.WriteFile(src, []byte("user"), 0o644)
	if err := CopyIfAbsent(src, dst); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(dst); string(data) != "user" {
		t.Fatalf("copied %q", data)
	}
	if fi, _ := os.Stat(dst); fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	os.WriteFile(dst, []byte("own"), 0o600)
	if err := CopyIfAbsent(src, dst); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(dst); string(data) != "own" {
		t.Fatal("an existing file was overwritten")
	}
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
