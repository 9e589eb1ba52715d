package runner

import (
	"fmt"
	"strings"

	"github.com/drover-run/drover"
)

// Tool is what describing a vendor's tool takes (UES-5): its kind, and
// where a call's input names the call's subject.
type Tool struct {
	Kind drover.ToolKind
	// Keys are the input's members that may hold the subject, the first
	// that does wins: a non-empty string, or a non-empty list (a command's
	// argv) joined with spaces.
	Keys []string
	// Subject, when set, finds the subject instead of Keys.
	Subject func(input map[string]any) string
}

// Tools are a vendor's tools by name, spelled as the vendor does.
type Tools map[string]Tool

// Describe returns the one-line description of a call of the tool name
// with input: drover.DescribeCall of its kind and subject, "Using NAME"
// for a tool t does not list.
func (t Tools) Describe(name string, input map[string]any) string {
	tool, ok := t[name]
	if !ok {
		return drover.DescribeCall(drover.ToolOther, name, "")
	}
	subject := ""
	if tool.Subject != nil {
		subject = tool.Subject(input)
	} else {
		subject = InputString(input, tool.Keys...)
	}
	return drover.DescribeCall(tool.Kind, name, subject)
}

// InputString returns the first of input's keys that holds a non-empty
// string, or a non-empty list (joined with spaces); "" when none does.
func InputString(input map[string]any, keys ...string) string {
	for _, k := range keys {
		switch v := input[k].(type) {
		case string:
			if v != "" {
				return v
			}
		case []any:
			if len(v) > 0 {
				parts := make([]string, 0, len(v))
				for _, e := range v {
					parts = append(parts, fmt.Sprint(e))
				}
				return strings.Join(parts, " ")
			}
		}
	}
	return ""
}
