package codex

import (
	"fmt"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/runner"
)

// tools are Codex's tools as their calls are described (UES-5): the
// items of `codex exec --json` and the app-server, under drover's names
// for them (exec_command, apply_patch, web_search), and the model's calls
// the rollout records (exec_command's cmd, shell's argv, apply_patch's
// patch as input); the rest read "Using NAME".
var tools = runner.Tools{
	"exec_command": {Kind: drover.ToolShell, Keys: []string{"command", "cmd"}},
	"shell":        {Kind: drover.ToolShell, Keys: []string{"command", "cmd"}},
	"local_shell":  {Kind: drover.ToolShell, Keys: []string{"command", "cmd"}},
	"apply_patch":  {Kind: drover.ToolPatch, Subject: patchSubject},
	"read_file":    {Kind: drover.ToolRead, Keys: []string{"file_path"}},
	"web_search":   {Kind: drover.ToolWebSearch, Keys: []string{"query"}},
	"update_plan":  {Kind: drover.ToolPlan},
}

// describeCommand describes a command_execution: Codex reports the command
// wrapped as `/bin/bash -lc '…'`; the description shows what is inside.
func describeCommand(cmd string) string {
	return drover.DescribeCall(drover.ToolShell, "exec_command", unwrapShell(cmd))
}

// patchSubject is the first file an apply_patch call changes: named in
// its patch (the model's call: "*** Add File: a.go"), or in its list of
// changes (an item: [{"path": …, "kind": …}]), with how many more.
func patchSubject(input map[string]any) string {
	patch := runner.InputString(input, "input", "patch")
	for line := range strings.SplitSeq(patch, "\n") {
		for _, p := range []string{"*** Add File: ", "*** Update File: ", "*** Delete File: "} {
			if f, ok := strings.CutPrefix(line, p); ok {
				return strings.TrimSpace(f)
			}
		}
	}
	changes, _ := input["changes"].([]any)
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
