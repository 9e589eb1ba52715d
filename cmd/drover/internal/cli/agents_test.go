package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

func TestCLI_AgentsLists(t *testing.T) {
	self, _ := os.Executable()
	t.Setenv("DROVER_CLAUDE_BIN", self)
	t.Setenv(fakeEnv, "version")
	var out, errb bytes.Buffer
	if code := Run(context.Background(), []string{"agents", "--json"}, strings.NewReader(""), &out, &errb); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var row struct {
		ID        string `json:"id"`
		Installed bool   `json:"installed"`
		Path      string `json:"path"`
		Tested    bool   `json:"tested"`
	}
	ids := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if err := json.Unmarshal([]byte(l), &row); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		ids[row.ID] = true
		if row.ID == "claude-code" && (!row.Installed || row.Path != self || row.Tested) {
			t.Fatalf("claude row %+v", row)
		}
	}
	for _, id := range []string{"claude-code", "codex", "gemini"} {
		if !ids[id] {
			t.Errorf("drover agents lacks %s", id)
		}
	}
}
