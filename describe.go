package drover

import (
	"fmt"
	"strings"
)

// DescribeTool returns a one-line human description of a tool call for live
// views (UES-5): "Running `go test ./...`", "Writing main.go". It knows the
// common tool names of every vendor and falls back to "Using NAME".
func DescribeTool(name string, input map[string]any) string {
	str := func(keys ...string) string {
		for _, k := range keys {
			if s, ok := input[k].(string); ok && s != "" {
				return s
			}
			if a, ok := input[k].([]any); ok && len(a) > 0 {
				parts := make([]string, 0, len(a))
				for _, v := range a {
					parts = append(parts, fmt.Sprint(v))
				}
				return strings.Join(parts, " ")
			}
		}
		return ""
	}
	var d string
	switch n := strings.ToLower(name); n {
	case "bash", "shell", "exec_command", "run_shell_command", "local_shell", "command":
		d = withArg("Running", str("command", "cmd"), true)
	case "write", "write_file", "create_file":
		d = withArg("Writing", str("file_path", "path", "filePath"), false)
	case "edit", "multiedit", "replace", "edit_file", "str_replace", "notebookedit":
		d = withArg("Editing", str("file_path", "path", "filePath", "notebook_path"), false)
	case "apply_patch", "patch":
		target := patchTarget(str("input", "patch"))
		if target == "" {
			target = changesTarget(input["changes"])
		}
		d = withArg("Patching", target, false)
	case "read", "read_file", "view", "read_many_files":
		d = withArg("Reading", str("file_path", "path", "filePath", "absolute_path"), false)
	case "grep", "search_file_content", "search", "rg":
		d = withArg("Searching for", str("pattern", "query"), true)
	case "glob", "ls", "list", "list_directory", "find":
		d = withArg("Listing", str("pattern", "path", "dir_path"), false)
	case "webfetch", "web_fetch", "fetch":
		d = withArg("Fetching", str("url", "prompt"), false)
	case "websearch", "web_search", "google_web_search":
		d = withArg("Searching the web for", str("query"), true)
	case "task", "agent":
		d = withArg("Delegating", str("description", "prompt"), false)
	case "todowrite", "todo_write", "update_plan", "write_todos":
		d = "Updating the plan"
	default:
		d = "Using " + name
	}
	return oneLine(d, 100)
}

func withArg(verb, arg string, code bool) string {
	if arg == "" {
		return verb
	}
	arg = oneLine(arg, 80)
	if code {
		return verb + " `" + arg + "`"
	}
	return verb + " " + arg
}

// patchTarget extracts the first file named in an apply_patch body.
func patchTarget(patch string) string {
	for line := range strings.SplitSeq(patch, "\n") {
		for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: "} {
			if f, ok := strings.CutPrefix(line, p); ok {
				return strings.TrimSpace(f)
			}
		}
	}
	return ""
}

// changesTarget names the first file of a file-change list
// ([{"path": …, "kind": …}], as Codex reports applied patches).
func changesTarget(v any) string {
	changes, _ := v.([]any)
	if len(changes) == 0 {
		return ""
	}
	first, _ := changes[0].(map[string]any)
	path, _ := first["path"].(string)
	if len(changes) > 1 && path != "" {
		return fmt.Sprintf("%s and %d more", path, len(changes)-1)
	}
	return path
}

// oneLine collapses whitespace runs to one space and cuts s to max runes with "…".
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
