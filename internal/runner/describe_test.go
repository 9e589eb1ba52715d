package runner

import (
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// TestUES5_ToolsDescribe: a call of a listed tool reads as its kind with
// the subject its input holds under the first of the tool's keys that has
// one (a list joined with spaces), or its Subject's; any other tool reads
// "Using NAME"; a description is one line of at most 100 runes.
func TestUES5_ToolsDescribe(t *testing.T) {
	tools := Tools{
		"sh":    {Kind: drover.ToolShell, Keys: []string{"command", "cmd"}},
		"w":     {Kind: drover.ToolWrite, Keys: []string{"path"}},
		"e":     {Kind: drover.ToolEdit, Keys: []string{"path"}},
		"p":     {Kind: drover.ToolPatch, Subject: func(in map[string]any) string { return strings.ToUpper(InputString(in, "f")) }},
		"r":     {Kind: drover.ToolRead, Keys: []string{"path"}},
		"grep":  {Kind: drover.ToolSearch, Keys: []string{"pattern"}},
		"ls":    {Kind: drover.ToolList, Keys: []string{"dir"}},
		"get":   {Kind: drover.ToolFetch, Keys: []string{"url"}},
		"web":   {Kind: drover.ToolWebSearch, Keys: []string{"query"}},
		"agent": {Kind: drover.ToolDelegate, Keys: []string{"task"}},
		"todo":  {Kind: drover.ToolPlan, Keys: []string{"todos"}},
		"x":     {Kind: drover.ToolOther},
		"y":     {Kind: "unheard-of"},
	}
	for _, c := range []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"sh", map[string]any{"command": "go test ./..."}, "Running `go test ./...`"},
		{"sh", map[string]any{"command": "", "cmd": "ls\n  -la"}, "Running `ls -la`"},
		{"sh", map[string]any{"command": []any{"bash", "-lc", "ls"}}, "Running `bash -lc ls`"},
		{"sh", map[string]any{"command": []any{}, "cmd": 7}, "Running"},
		{"sh", nil, "Running"},
		{"w", map[string]any{"path": "main.go"}, "Writing main.go"},
		{"e", map[string]any{"path": "a.go"}, "Editing a.go"},
		{"p", map[string]any{"f": "b.go"}, "Patching B.GO"},
		{"r", map[string]any{"path": "README.md"}, "Reading README.md"},
		{"grep", map[string]any{"pattern": "TODO"}, "Searching for `TODO`"},
		{"ls", map[string]any{"dir": "/ws"}, "Listing /ws"},
		{"get", map[string]any{"url": "https://go.dev"}, "Fetching https://go.dev"},
		{"web", map[string]any{"query": "go 1.26"}, "Searching the web for `go 1.26`"},
		{"agent", map[string]any{"task": "review"}, "Delegating review"},
		{"todo", map[string]any{"todos": []any{"a"}}, "Updating the plan"},
		{"x", map[string]any{}, "Using x"},
		{"y", map[string]any{}, "Using y"},
		{"SH", map[string]any{"command": "ls"}, "Using SH"},
		{"mcp__echo__echo", map[string]any{"text": "hi"}, "Using mcp__echo__echo"},
	} {
		if got := tools.Describe(c.name, c.input); got != c.want {
			t.Errorf("Describe(%s, %v) = %q, want %q", c.name, c.input, got, c.want)
		}
	}
	long := tools.Describe("sh", map[string]any{"command": strings.Repeat("x ", 300)})
	if n := len([]rune(long)); n > 100 || !strings.HasSuffix(long, "…`") {
		t.Errorf("a long command: %d runes, %q", n, long)
	}
	name := strings.Repeat("n", 200)
	if d := tools.Describe(name, nil); len([]rune(d)) != 100 || !strings.HasSuffix(d, "…") {
		t.Errorf("a long name: %q", d)
	}
}
