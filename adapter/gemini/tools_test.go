package gemini

import "testing"

// TestUES5_ToolDescriptions: Gemini CLI's tools are described by their
// subject, headless (its own input) and over ACP (the file as "path");
// others read "Using NAME".
func TestUES5_ToolDescriptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"run_shell_command", map[string]any{"command": "echo a", "description": "echo"}, "Running `echo a`"},
		{"write_file", map[string]any{"file_path": "/ws/w.txt", "content": "W"}, "Writing /ws/w.txt"},
		{"write_file", map[string]any{"path": "/ws/w.txt", "content": "W"}, "Writing /ws/w.txt"},
		{"replace", map[string]any{"file_path": "a.go", "old_string": "x", "new_string": "y"}, "Editing a.go"},
		{"read_file", map[string]any{"file_path": "/ws/r.txt"}, "Reading /ws/r.txt"},
		{"read_file", map[string]any{"absolute_path": "/ws/old.txt"}, "Reading /ws/old.txt"},
		{"glob", map[string]any{"pattern": "*.go", "dir_path": "/ws"}, "Listing *.go"},
		{"list_directory", map[string]any{"dir_path": "/ws"}, "Listing /ws"},
		{"list_directory", map[string]any{"path": "/ws"}, "Listing /ws"},
		{"web_fetch", map[string]any{"prompt": "summarise https://go.dev"}, "Fetching summarise https://go.dev"},
		{"google_web_search", map[string]any{"query": "go 1.26"}, "Searching the web for `go 1.26`"},
		{"write_todos", map[string]any{"todos": []any{}}, "Updating the plan"},
		{"save_memory", map[string]any{"fact": "x"}, "Using save_memory"},
		{"mcp_echo_echo", map[string]any{"text": "ping"}, "Using mcp_echo_echo"},
	} {
		if got := tools.Describe(c.name, c.input); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.name, c.input, got, c.want)
		}
	}
}
