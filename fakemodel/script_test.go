package fakemodel

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseScriptErrors(t *testing.T) {
	tests := []struct {
		name, script string
		want         []string // substrings of the error
	}{
		{"unknown field", `{"rules":[{"match":"","steps":[{"txt":"hi"}]}]}`, []string{`unknown field "txt"`}},
		{"unknown top-level field", `{"rule":[]}`, []string{`unknown field "rule"`}},
		{"bad regexp", `{"rules":[{"match":"ok","steps":[{"text":"a"}]},{"name":"broken","match":"(unclosed","steps":[{"text":"a"}]}]}`,
			[]string{"rules[1]", `"broken"`, "bad match regexp", "missing closing )"}},
		{"empty step", `{"rules":[{"match":"","steps":[{"text":"a"},{"delayMs":5}]}]}`,
			[]string{"rules[0].steps[1]", "empty step"}},
		{"no steps", `{"rules":[{"match":"x","steps":[]}]}`, []string{"rules[0]", "no steps"}},
		{"two intents", `{"rules":[{"match":"","steps":[{"tools":[{"shell":"ls","write":"a.txt"}]}]}]}`,
			[]string{"rules[0].steps[0]: tools[0]", "2 intents (shell and write)", "exactly one"}},
		{"no intent", `{"rules":[{"match":"","steps":[{"tools":[{"content":"x"}]}]}]}`,
			[]string{"tools[0]", "no intent"}},
		{"content without write", `{"rules":[{"match":"","steps":[{"tools":[{"read":"a","content":"x"}]}]}]}`,
			[]string{"content is only valid with write"}},
		{"input without name", `{"rules":[{"match":"","steps":[{"tools":[{"shell":"ls","input":{}}]}]}]}`,
			[]string{"input is only valid with name"}},
		{"input not object", `{"rules":[{"match":"","steps":[{"tools":[{"name":"X","input":[1]}]}]}]}`,
			[]string{"input must be a JSON object"}},
		{"status too low", `{"rules":[{"match":"","steps":[{"error":{"status":302}}]}]}`, []string{"302", "400..599"}},
		{"status too high", `{"rules":[{"match":"","steps":[{"error":{"status":600}}]}]}`, []string{"600"}},
		{"error and text", `{"rules":[{"match":"","steps":[{"error":{"status":500},"text":"x"}]}]}`,
			[]string{"error step cannot also have"}},
		{"negative delay", `{"rules":[{"match":"","steps":[{"text":"x","delayMs":-1}]}]}`, []string{"negative"}},
		{"trailing data", `{"rules":[]} {}`, []string{"trailing data"}},
		{"not JSON", `rules: []`, []string{"parse script"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseScript([]byte(tt.script))
			if err == nil {
				t.Fatal("ParseScript succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestParseScriptValid(t *testing.T) {
	s := mustParse(t, `{"rules":[
		{"name":"all","match":"(?i)hello (\\w+)","steps":[
			{"thinking":"hm","text":"hi","tools":[{"shell":"ls"},{"write":"a","content":""},{"read":"b"},{"name":"mcp__x__y","input":{"a":1}}],
			 "delayMs":1,"chunkDelayMs":1,"cut":true,"usage":{"input":1,"output":2,"cacheRead":3,"cacheWrite":4},"stopReason":"max_tokens"},
			{"error":{"status":429},"delayMs":3}
		]}]}`)
	if len(s.Rules) != 1 || len(s.Rules[0].Steps) != 2 || len(s.Rules[0].Steps[0].Tools) != 4 {
		t.Fatalf("parsed %+v", s)
	}
	if u := s.Rules[0].Steps[0].Usage; u == nil || *u != (Usage{Input: 1, Output: 2, CacheRead: 3, CacheWrite: 4}) {
		t.Errorf("usage %+v", u)
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, []byte(`{"rules":[{"match":"","steps":[{"text":"x"}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"rules":[{"match":"","steps":[{}]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadScript(good); err != nil {
		t.Errorf("LoadScript(good): %v", err)
	}
	if _, err := LoadScript(bad); err == nil || !strings.Contains(err.Error(), "bad.json") {
		t.Errorf("LoadScript(bad) = %v, want an error naming the file", err)
	}
	if _, err := LoadScript(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("LoadScript(missing) succeeded")
	}
}

func TestNewPanicsOnInvalidScript(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "bad match regexp") {
			t.Errorf("recover() = %v", r)
		}
	}()
	New(&Script{Rules: []Rule{{Match: "(", Steps: []Step{{Text: "x"}}}}})
}

// TestScriptCopied checks that the server keeps its own copy of a script.
func TestScriptCopied(t *testing.T) {
	sc := &Script{Rules: []Rule{{Match: "", Steps: []Step{{Text: "before"}}}}}
	s := New(sc)
	defer s.Close()
	sc.Rules[0].Steps[0].Text = "after"
	a := s.prog.Load().resolve(&exchange{prompt: "x"}, anthropicWire{}.tools())
	if a.text != "before" {
		t.Errorf("text %q, want the script as given to New", a.text)
	}
}
