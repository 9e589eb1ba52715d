package claude

import (
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// tools are Claude Code's tools (and the Anthropic API's server tools it
// passes on) as their calls are described (UES-5); the rest read "Using
// NAME".
var tools = runner.Tools{
	"Bash":         {Kind: drover.ToolShell, Keys: []string{"command"}},
	"Write":        {Kind: drover.ToolWrite, Keys: []string{"file_path"}},
	"Edit":         {Kind: drover.ToolEdit, Keys: []string{"file_path"}},
	"MultiEdit":    {Kind: drover.ToolEdit, Keys: []string{"file_path"}},
	"NotebookEdit": {Kind: drover.ToolEdit, Keys: []string{"notebook_path"}},
	"Read":         {Kind: drover.ToolRead, Keys: []string{"file_path"}},
	"Grep":         {Kind: drover.ToolSearch, Keys: []string{"pattern"}},
	"Glob":         {Kind: drover.ToolList, Keys: []string{"pattern", "path"}},
	"LS":           {Kind: drover.ToolList, Keys: []string{"path"}},
	"WebFetch":     {Kind: drover.ToolFetch, Keys: []string{"url", "prompt"}},
	"web_fetch":    {Kind: drover.ToolFetch, Keys: []string{"url"}},
	"WebSearch":    {Kind: drover.ToolWebSearch, Keys: []string{"query"}},
	"web_search":   {Kind: drover.ToolWebSearch, Keys: []string{"query"}},
	"Task":         {Kind: drover.ToolDelegate, Keys: []string{"description", "prompt"}},
	"Agent":        {Kind: drover.ToolDelegate, Keys: []string{"description", "prompt"}},
	"TodoWrite":    {Kind: drover.ToolPlan},
}
