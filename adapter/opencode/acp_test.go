package opencode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/adapter/acp"
	"github.com/drover-run/drover/adapter/acp/acptest"
	"github.com/drover-run/drover/adapter/adaptertest"
)

// TestACP1_OpenCodeLivePrepare: a live run is `opencode acp` with the
// configuration of `opencode run` and an ACP conversation; with API
// retries, drover's plugin records the status of a failed call in the
// run's home (a stale one removed first), where the dialect reads it.
func TestACP1_OpenCodeLivePrepare(t *testing.T) {
	zero := 0
	home := t.TempDir()
	status := filepath.Join(home, "drover", "last-status")
	if err := os.MkdirAll(filepath.Dir(status), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(status, []byte("500"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := drover.Options{ConfigDir: home, APIRetries: &zero, Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:9"}, PartialText: true}
	l, err := New().Prepare(drover.Request{Prompt: "hi", Options: o, Live: acptest.NoInputs{}})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Cleanup()
	if _, ok := l.Translator.(*acp.Conversation); !ok || !slices.Equal(l.Args, []string{"acp"}) || !l.Converse || l.Stdin != "" {
		t.Fatalf("live launch %v %T", l.Args, l.Translator)
	}
	if _, err := os.Stat(status); !os.IsNotExist(err) {
		t.Fatalf("the stale status of an earlier run is still there: %v", err)
	}
	var cfg string
	for _, e := range l.Env {
		if v, ok := strings.CutPrefix(e, "OPENCODE_CONFIG_CONTENT="); ok {
			cfg = v
		}
	}
	if !strings.Contains(cfg, `"agent":{"drover"`) || !strings.Contains(cfg, "retries.js") {
		t.Fatalf("config %s", cfg)
	}
	plugin, err := os.ReadFile(filepath.Join(home, "drover", "retries.js"))
	if err != nil || !strings.Contains(string(plugin), "const STATUS = \""+status+"\";") {
		t.Fatalf("plugin %s: %v", plugin, err)
	}
	if err := os.WriteFile(status, []byte("429\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n := acpDialect(status, "", time.Time{}).FailureStatus(); n != 429 {
		t.Fatalf("status %d", n)
	}
	if n := acpDialect("", "", time.Time{}).FailureStatus(); n != 0 {
		t.Fatalf("status without a file %d", n)
	}
}

// TestADP3_PartialTextNeedsLive: `opencode run` prints whole parts, so a
// run that nobody can answer (headless) refuses partial text.
func TestADP3_PartialTextNeedsLive(t *testing.T) {
	adaptertest.Refused(t, New(), map[string]drover.Options{"partialText": {PartialText: true}})
}

// TestACP1_OpenCodeDialect: OpenCode's ACP ways: a call named by its first
// title and described by OpenCode's tools, its denials by their texts, an
// unknown session's load failure.
func TestACP1_OpenCodeDialect(t *testing.T) {
	d := acpDialect("", "", time.Time{})
	if n := d.ToolName(acp.Call{ID: "call_1", Title: "bash", Kind: "execute"}); n != "bash" {
		t.Fatalf("name %q", n)
	}
	if got := d.Tools.Describe("write", map[string]any{"filePath": "a.txt"}); got != "Writing a.txt" {
		t.Fatalf("a write over ACP described %q", got)
	}
	if !d.Denied("The user rejected permission to use this specific tool call.") || d.Denied("exit 1") {
		t.Fatal("denial texts misread")
	}
	if !d.UnknownSession(-32603, "Internal error: OpenCode service failure", json.RawMessage(`{"service":"session"}`)) ||
		d.UnknownSession(-32603, "Internal error: x", json.RawMessage(`{"service":"provider"}`)) {
		t.Fatal("unknown session misread")
	}
}

// TestADP3_ModelInConfig: `opencode acp` has no --model; the model is the
// generated configuration's.
func TestADP3_ModelInConfig(t *testing.T) {
	cfg, err := Config(drover.Options{Model: "anthropic/claude-sonnet-4"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var c map[string]any
	if err := json.Unmarshal(cfg, &c); err != nil || c["model"] != "anthropic/claude-sonnet-4" {
		t.Fatalf("config %s: %v", cfg, err)
	}
}
