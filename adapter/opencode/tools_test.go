package opencode

import "testing"

// TestUES5_ToolDescriptions: OpenCode's tools are described by their
// subject, in `opencode run` (its own input) and over ACP (the file as
// "path"); others read "Using NAME".
func TestUES5_ToolDescriptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"bash", map[string]any{"command": "echo hello-oc", "description": "run it"}, "Running `echo hello-oc`"},
		{"bash", map[string]any{"error": "unavailable tool", "tool": "bash"}, "Running"},
		{"write", map[string]any{"filePath": "hello.txt", "content": "hi"}, "Writing hello.txt"},
		{"write", map[string]any{"path": "/ws/hello.txt"}, "Writing /ws/hello.txt"},
		{"edit", map[string]any{"filePath": "a.go", "oldString": "x", "newString": "y"}, "Editing a.go"},
		{"multiedit", map[string]any{"filePath": "b.go"}, "Editing b.go"},
		{"patch", map[string]any{"patchText": "*** Begin Patch"}, "Patching"},
		{"read", map[string]any{"filePath": "notes.txt"}, "Reading notes.txt"},
		{"grep", map[string]any{"pattern": "TODO"}, "Searching for `TODO`"},
		{"glob", map[string]any{"pattern": "**/*.go"}, "Listing **/*.go"},
		{"list", map[string]any{"path": "/ws"}, "Listing /ws"},
		{"webfetch", map[string]any{"url": "https://go.dev", "format": "text"}, "Fetching https://go.dev"},
		{"websearch", map[string]any{"query": "go 1.26"}, "Searching the web for `go 1.26`"},
		{"task", map[string]any{"description": "explore", "prompt": "p"}, "Delegating explore"},
		{"todowrite", map[string]any{"todos": []any{}}, "Updating the plan"},
		{"skill", map[string]any{"name": "x"}, "Using skill"},
	} {
		if got := tools.Describe(c.name, c.input); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.name, c.input, got, c.want)
		}
	}
}
