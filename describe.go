package drover

import (
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

// oneLine collapses whitespace runs to one space and cuts s to max runes with "…".
func oneLine(s string, max int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}
