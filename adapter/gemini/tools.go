package gemini

import (
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// tools are Gemini CLI's tools as their calls are described (UES-5), in
// headless runs and live ones over ACP; the rest read "Using NAME". Over
// ACP Gemini sends no input, and a call's input is what ACP's other
// fields say (adapter/acp): its file as "path", a shell call's command.
// Versions before 0.61.0 called read_file's file absolute_path.
var tools = runner.Tools{
	"run_shell_command": {Kind: drover.ToolShell, Keys: []string{"command"}},
	"write_file":        {Kind: drover.ToolWrite, Keys: []string{"file_path", "path"}},
	"replace":           {Kind: drover.ToolEdit, Keys: []string{"file_path", "path"}},
	"read_file":         {Kind: drover.ToolRead, Keys: []string{"file_path", "path", "absolute_path"}},
	"glob":              {Kind: drover.ToolList, Keys: []string{"pattern", "path", "dir_path"}},
	"list_directory":    {Kind: drover.ToolList, Keys: []string{"path", "dir_path"}},
	"web_fetch":         {Kind: drover.ToolFetch, Keys: []string{"prompt"}},
	"google_web_search": {Kind: drover.ToolWebSearch, Keys: []string{"query"}},
	"write_todos":       {Kind: drover.ToolPlan},
}
