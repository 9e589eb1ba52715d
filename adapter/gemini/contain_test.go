package gemini

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/drover-run/drover"
)

// TestSEC2_GeminiWritable: a contained Gemini may write the run's
// temporary directory (policy, a temporary home) and the .gemini directory
// of its home (ConfigDir, GEMINI_CLI_HOME, else $HOME), nothing else.
func TestSEC2_GeminiWritable(t *testing.T) {
	home, cfg := t.TempDir(), filepath.Join(t.TempDir(), "cfg")
	t.Setenv("GEMINI_CLI_HOME", "")
	for _, c := range []struct {
		name string
		opts drover.Options
		own  string // the home's .gemini; "" for the temporary home
	}{
		{"user's home", drover.Options{Env: map[string]string{"HOME": home}}, filepath.Join(home, ".gemini")},
		{"configDir", drover.Options{ConfigDir: cfg}, filepath.Join(cfg, ".gemini")},
		{"GEMINI_CLI_HOME", drover.Options{Env: map[string]string{"GEMINI_CLI_HOME": cfg}}, filepath.Join(cfg, ".gemini")},
		{"endpoint: a temporary home", drover.Options{Endpoint: &drover.Endpoint{BaseURL: "http://127.0.0.1:1"}}, ""},
	} {
		l, err := New().Prepare(drover.Request{Prompt: "p", Options: c.opts})
		if err != nil {
			t.Fatal(err)
		}
		tmp := l.Writable[0]
		if !strings.HasPrefix(filepath.Base(tmp), "drover-gemini-") || len(l.Writable) != 2 || len(l.WritableFiles) != 0 {
			t.Errorf("%s: writable %q %q", c.name, l.Writable, l.WritableFiles)
		}
		own := c.own
		if own == "" {
			own = filepath.Join(tmp, "home", ".gemini")
		}
		if len(l.Writable) == 2 && l.Writable[1] != own {
			t.Errorf("%s: writable %q, want the run's temporary directory and %s", c.name, l.Writable, own)
		}
		l.Cleanup()
		if _, err := os.Stat(tmp); err == nil {
			t.Errorf("%s: %s left", c.name, tmp)
		}
	}
}
