package acp

import (
	"testing"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
	"github.com/drover-run/drover/internal/testkit/uestest"
)

// TestUES5_ACPToolDescriptions: a call is described by the dialect's
// tools under the name the dialect gave it, else by its ACP kind when it
// is named by that, else by its title, else "Using NAME".
func TestUES5_ACPToolDescriptions(t *testing.T) {
	d := Dialect{Tools: runner.Tools{
		"run":  {Kind: drover.ToolShell, Keys: []string{"script"}},
		"edit": {Kind: drover.ToolWrite, Keys: []string{"target"}},
	}}
	c := NewConversation(uestest.Stamp("t"), Session{Cwd: t.TempDir()}, d)
	plain := NewConversation(uestest.Stamp("t"), Session{Cwd: t.TempDir()}, Dialect{})
	for _, tc := range []struct {
		conv  *Conversation
		call  call
		input map[string]any
		want  string
	}{
		{c, call{name: "run", kind: "execute", title: "run it"}, map[string]any{"script": "make"}, "Running `make`"},
		{c, call{name: "edit", kind: "edit", title: "x"}, map[string]any{"target": "a.go", "path": "b.go"}, "Writing a.go"},
		{c, call{name: "execute", kind: "execute", title: "ls -la"}, map[string]any{"command": "ls -la"}, "Running `ls -la`"},
		{c, call{name: "mystery", kind: "other", title: "Doing a thing"}, map[string]any{}, "Doing a thing"},
		{plain, call{name: "edit", kind: "edit"}, map[string]any{"path": "/ws/a.go"}, "Editing /ws/a.go"},
		{plain, call{name: "read", kind: "read"}, map[string]any{"absolute_path": "/ws/r.md"}, "Reading /ws/r.md"},
		{plain, call{name: "search", kind: "search"}, map[string]any{"query": "TODO"}, "Searching for `TODO`"},
		{plain, call{name: "fetch", kind: "fetch"}, map[string]any{"url": "https://go.dev"}, "Fetching https://go.dev"},
		{plain, call{name: "delete", kind: "delete", title: "Deleting a.go"}, map[string]any{"path": "a.go"}, "Deleting a.go"},
		{plain, call{name: "tool"}, map[string]any{}, "Using tool"},
	} {
		if got := tc.conv.description(&tc.call, tc.input); got != tc.want {
			t.Errorf("%+v %v: %q, want %q", tc.call, tc.input, got, tc.want)
		}
	}
}
