package claude

import "testing"

// TestUES5_ToolDescriptions: Claude Code's tools, and the server tools it
// passes on, are described by their subject; others, and names Claude
// does not spell so, read "Using NAME".
func TestUES5_ToolDescriptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"Bash", map[string]any{"command": "go test ./...", "description": "run the tests"}, "Running `go test ./...`"},
		{"Bash", map[string]any{}, "Running"},
		{"Write", map[string]any{"file_path": "/ws/main.go", "content": "package main"}, "Writing /ws/main.go"},
		{"Edit", map[string]any{"file_path": "a.go", "old_string": "x", "new_string": "y"}, "Editing a.go"},
		{"MultiEdit", map[string]any{"file_path": "b.go", "edits": []any{}}, "Editing b.go"},
		{"NotebookEdit", map[string]any{"notebook_path": "n.ipynb"}, "Editing n.ipynb"},
		{"Read", map[string]any{"file_path": "README.md"}, "Reading README.md"},
		{"Grep", map[string]any{"pattern": "TODO", "path": "src"}, "Searching for `TODO`"},
		{"Glob", map[string]any{"pattern": "**/*.go", "path": "/ws"}, "Listing **/*.go"},
		{"Glob", map[string]any{"path": "/ws"}, "Listing /ws"},
		{"LS", map[string]any{"path": "/ws"}, "Listing /ws"},
		{"WebFetch", map[string]any{"url": "https://go.dev", "prompt": "summarise"}, "Fetching https://go.dev"},
		{"web_fetch", map[string]any{"url": "https://go.dev"}, "Fetching https://go.dev"},
		{"WebSearch", map[string]any{"query": "go 1.26"}, "Searching the web for `go 1.26`"},
		{"web_search", map[string]any{"query": "go 1.26"}, "Searching the web for `go 1.26`"},
		{"Agent", map[string]any{"description": "probe subagent", "prompt": "p"}, "Delegating probe subagent"},
		{"Task", map[string]any{"prompt": "look around"}, "Delegating look around"},
		{"TodoWrite", map[string]any{"todos": []any{}}, "Updating the plan"},
		{"mcp__echo__echo", map[string]any{"text": "ping"}, "Using mcp__echo__echo"},
		{"bash", map[string]any{"command": "ls"}, "Using bash"},
	} {
		if got := tools.Describe(c.name, c.input); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.name, c.input, got, c.want)
		}
	}
}
