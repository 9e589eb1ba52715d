package codex

import "testing"

// TestUES5_ToolDescriptions: Codex's tools are described by their subject
// (a shell command by the script inside Codex's wrapper; a patch by its
// first file, from the model's patch or an item's changes); others read
// "Using NAME".
func TestUES5_ToolDescriptions(t *testing.T) {
	for _, c := range []struct {
		name  string
		input map[string]any
		want  string
	}{
		{"exec_command", map[string]any{"cmd": "ls\n  -la", "workdir": "/ws"}, "Running `ls -la`"},
		{"exec_command", map[string]any{"command": "go vet"}, "Running `go vet`"},
		{"shell", map[string]any{"command": []any{"bash", "-lc", "ls"}}, "Running `bash -lc ls`"},
		{"apply_patch", map[string]any{"input": "*** Begin Patch\n*** Add File: hello.txt\n+hi\n*** End Patch\n"}, "Patching hello.txt"},
		{"apply_patch", map[string]any{"input": "*** Begin Patch\n*** Update File: a.go\n*** Delete File: b.go\n"}, "Patching a.go"},
		{"apply_patch", map[string]any{"input": "*** Begin Patch\n*** Delete File:  b.go \n"}, "Patching b.go"},
		{"apply_patch", map[string]any{"changes": []any{map[string]any{"path": "/ws/a.go", "kind": "add"}}}, "Patching /ws/a.go"},
		{"apply_patch", map[string]any{"changes": []any{map[string]any{"path": "a.go"}, map[string]any{"path": "b.go"}, map[string]any{"path": "c.go"}}}, "Patching a.go and 2 more"},
		{"apply_patch", map[string]any{"changes": []any{}}, "Patching"},
		{"apply_patch", map[string]any{"input": "no envelope"}, "Patching"},
		{"web_search", map[string]any{"query": "go 1.26"}, "Searching the web for `go 1.26`"},
		{"update_plan", map[string]any{"plan": []any{}}, "Updating the plan"},
		{"write_stdin", map[string]any{"chars": "y\n"}, "Using write_stdin"},
		{"view_image", map[string]any{"path": "x.png"}, "Using view_image"},
		{"mcp__echo__echo", map[string]any{"text": "ping"}, "Using mcp__echo__echo"},
	} {
		if got := tools.Describe(c.name, c.input); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.name, c.input, got, c.want)
		}
	}
	for cmd, want := range map[string]string{
		"/bin/bash -lc 'echo hi > a.txt'": "Running `echo hi > a.txt`",
		"/usr/bin/zsh -lc ls":             "Running `ls`",
		"git status":                      "Running `git status`",
		"":                                "Running",
	} {
		if got := describeCommand(cmd); got != want {
			t.Errorf("describeCommand(%q) = %q, want %q", cmd, got, want)
		}
	}
}
