package opencode

import (
	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// tools are OpenCode's tools as their calls are described (UES-5), in
// `opencode run` and live runs over ACP; the rest read "Using NAME". A
// call over ACP that has no input yet has what ACP's other fields say
// (adapter/acp): its file as "path", a shell call's command.
var tools = runner.Tools{
	"bash":        {Kind: drover.ToolShell, Keys: []string{"command"}},
	"write":       {Kind: drover.ToolWrite, Keys: []string{"path", "filePath"}},
	"edit":        {Kind: drover.ToolEdit, Keys: []string{"path", "filePath"}},
	"multiedit":   {Kind: drover.ToolEdit, Keys: []string{"path", "filePath"}},
	"patch":       {Kind: drover.ToolPatch},
	"apply_patch": {Kind: drover.ToolPatch},
	"read":        {Kind: drover.ToolRead, Keys: []string{"path", "filePath"}},
	"grep":        {Kind: drover.ToolSearch, Keys: []string{"pattern"}},
	"glob":        {Kind: drover.ToolList, Keys: []string{"pattern", "path"}},
	"list":        {Kind: drover.ToolList, Keys: []string{"path"}},
	"webfetch":    {Kind: drover.ToolFetch, Keys: []string{"url"}},
	"websearch":   {Kind: drover.ToolWebSearch, Keys: []string{"query"}},
	"task":        {Kind: drover.ToolDelegate, Keys: []string{"description", "prompt"}},
	"todowrite":   {Kind: drover.ToolPlan},
}
