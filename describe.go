package drover

import (
	"fmt"
	"strings"
)

// ToolKind is what a tool call does, as far as its one-line description
// (UES-5) goes: the vocabulary each vendor package maps its own tools to
// (compare ACP's tool kinds). A call of a kind is described from its
// subject, what it acts on: a command, a file, a pattern, a URL, a task.
type ToolKind string

// The kinds, each with how a call of it reads.
const (
	ToolShell     ToolKind = "shell"      // "Running `go test ./...`"
	ToolWrite     ToolKind = "write"      // "Writing main.go"
	ToolEdit      ToolKind = "edit"       // "Editing main.go"
	ToolPatch     ToolKind = "patch"      // "Patching main.go"
	ToolRead      ToolKind = "read"       // "Reading README.md"
	ToolSearch    ToolKind = "search"     // "Searching for `TODO`"
	ToolList      ToolKind = "list"       // "Listing **/*.go"
	ToolFetch     ToolKind = "fetch"      // "Fetching https://go.dev"
	ToolWebSearch ToolKind = "web_search" // "Searching the web for `go 1.26`"
	ToolDelegate  ToolKind = "delegate"   // "Delegating review the diff"
	ToolPlan      ToolKind = "plan"       // "Updating the plan"
	ToolOther     ToolKind = "other"      // "Using NAME"
)

// DescribeCall returns the one-line description (UES-5) of a call of the
// tool name, of kind k, whose subject is subject ("" when it has none or
// it is not known: "Running"). A kind it does not know reads as ToolOther,
// "Using NAME". Whitespace runs become one space; the subject is cut to 80
// runes, the description to 100, with "…".
func DescribeCall(k ToolKind, name, subject string) string {
	var d string
	switch k {
	case ToolShell:
		d = withArg("Running", subject, true)
	case ToolWrite:
		d = withArg("Writing", subject, false)
	case ToolEdit:
		d = withArg("Editing", subject, false)
	case ToolPatch:
		d = withArg("Patching", subject, false)
	case ToolRead:
		d = withArg("Reading", subject, false)
	case ToolSearch:
		d = withArg("Searching for", subject, true)
	case ToolList:
		d = withArg("Listing", subject, false)
	case ToolFetch:
		d = withArg("Fetching", subject, false)
	case ToolWebSearch:
		d = withArg("Searching the web for", subject, true)
	case ToolDelegate:
		d = withArg("Delegating", subject, false)
	case ToolPlan:
		d = "Updating the plan"
	default:
		d = "Using " + name
	}
	return oneLine(d, 100)
}

// DescribeTool returns a one-line description of a call of the tool name
// with input, for an event whose adapter gave none: the adapters describe
// their own tools' calls, since each vendor's tool names and inputs are its
// own. It knows a few common names ("bash", "read", "apply_patch", …), any
// case, and falls back to "Using NAME".
func DescribeTool(name string, input map[string]any) string {
	k, ok := commonTools[strings.ToLower(name)]
	if !ok {
		return DescribeCall(ToolOther, name, "")
	}
	var subject string
	if k == ToolPatch {
		subject = patchTarget(inputString(input, "input", "patch"))
		if subject == "" {
			subject = changesTarget(input["changes"])
		}
	} else {
		subject = inputString(input, commonKeys[k]...)
	}
	return DescribeCall(k, name, subject)
}

// commonTools are the tool names DescribeTool knows, lower-cased, and
// commonKeys the input members that name each kind's subject, first found
// first.
var (
	commonTools = map[string]ToolKind{
		"bash": ToolShell, "shell": ToolShell, "command": ToolShell, "exec_command": ToolShell,
		"write": ToolWrite, "create_file": ToolWrite,
		"edit": ToolEdit, "multiedit": ToolEdit, "edit_file": ToolEdit, "str_replace": ToolEdit,
		"apply_patch": ToolPatch, "patch": ToolPatch,
		"read": ToolRead, "read_file": ToolRead, "view": ToolRead,
		"grep": ToolSearch, "search": ToolSearch, "rg": ToolSearch,
		"glob": ToolList, "ls": ToolList, "list": ToolList, "find": ToolList,
		"webfetch": ToolFetch, "web_fetch": ToolFetch, "fetch": ToolFetch,
		"websearch": ToolWebSearch, "web_search": ToolWebSearch,
		"task": ToolDelegate, "todowrite": ToolPlan, "todo_write": ToolPlan,
	}
	commonKeys = map[ToolKind][]string{
		ToolShell:     {"command", "cmd"},
		ToolWrite:     {"file_path", "path", "filePath"},
		ToolEdit:      {"file_path", "path", "filePath"},
		ToolRead:      {"file_path", "path", "filePath"},
		ToolSearch:    {"pattern", "query"},
		ToolList:      {"pattern", "path"},
		ToolFetch:     {"url"},
		ToolWebSearch: {"query"},
		ToolDelegate:  {"description", "prompt"},
	}
)

// inputString is the first of input's keys that holds a non-empty string
// or list (joined with spaces), or "".
func inputString(input map[string]any, keys ...string) string {
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
