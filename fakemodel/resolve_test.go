package fakemodel

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

func decodeAnthropic(t *testing.T, b []byte) *exchange {
	t.Helper()
	x, err := anthropicWire{}.decode(nil, b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	return x
}

func TestStepSelection(t *testing.T) {
	tools := []string{"Bash", "Write"}
	sys := "You are Claude."
	env := msg("system", "# Environment\n - Primary working directory: /w\n")
	prompt := msg("user", []any{text(reminder), text("write a.txt then run ls")})
	call1 := msg("assistant", []any{
		map[string]any{"type": "thinking", "thinking": "t", "signature": "s"},
		toolUseBlock("toolu_1", "Write", map[string]any{"file_path": "/w/a.txt", "content": "x"}),
	})
	result1 := msg("user", []any{toolResultBlock("toolu_1", "ok", false)})
	call2 := msg("assistant", []any{toolUseBlock("toolu_2", "Bash", map[string]any{"command": "ls"})})
	result2 := msg("user", []any{toolResultBlock("toolu_2", "a.txt", false), text(reminder)})

	tests := []struct {
		name       string
		msgs       []map[string]any
		wantPrompt string
		wantStep   int
	}{
		{"prompt only", []map[string]any{prompt}, "write a.txt then run ls", 0},
		{"string content", []map[string]any{msg("user", "hello there")}, "hello there", 0},
		{"prompt, tool use, tool result", []map[string]any{prompt, env, call1, result1}, "write a.txt then run ls", 1},
		{"two rounds, reminder beside a result", []map[string]any{prompt, env, call1, result1, call2, result2}, "write a.txt then run ls", 2},
		{"split assistant messages are one turn", []map[string]any{prompt, call1, msg("assistant", []any{text("more")}), result1}, "write a.txt then run ls", 1},
		{"new prompt after history", []map[string]any{prompt, call1, result1, msg("assistant", []any{text("done")}),
			msg("user", []any{text(reminder), text("second prompt")})}, "second prompt", 0},
		{"interrupt merge keys on the last text", []map[string]any{msg("user", []any{
			text("first"), text("[Request interrupted by user]\n"), text("third")})}, "third", 0},
		{"no user text", []map[string]any{msg("user", []any{text(reminder)})}, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := decodeAnthropic(t, body(true, tools, sys, tt.msgs...))
			if x.prompt != tt.wantPrompt || x.turns != tt.wantStep {
				t.Errorf("prompt %q step %d, want %q step %d", x.prompt, x.turns, tt.wantPrompt, tt.wantStep)
			}
		})
	}
}

func TestDecodeLogFields(t *testing.T) {
	b := body(false, []string{"Bash", "mcp__echo__echo"}, "sys",
		msg("user", []any{text(reminder), text("old prompt")}),
		msg("assistant", []any{text("old answer")}),
		msg("user", []any{text("before " + reminder + " after"), text("new prompt")}),
		msg("system", []any{text("The user sent a new message while you were working:\nsteer me\n\nmore\n\n" +
			"This is how Claude Code surfaces messages the user sends mid-turn. Address the message above.")}),
		msg("assistant", []any{toolUseBlock("toolu_a", "Bash", map[string]any{"command": "ls"}),
			toolUseBlock("toolu_b", "mcp__echo__echo", map[string]any{})}),
		msg("user", []any{
			toolResultBlock("toolu_a", "plain string", false),
			toolResultBlock("toolu_b", []any{text("line 1"), text("line 2"), map[string]any{"type": "image"}}, true),
		}),
	)
	x := decodeAnthropic(t, b)
	if diff := cmp.Diff([]string{"old prompt", "before \n\n after", "new prompt", "steer me\n\nmore"}, x.userTexts); diff != "" {
		t.Errorf("userTexts (-want +got):\n%s", diff)
	}
	want := []ToolResult{
		{ToolUseID: "toolu_a", Content: "plain string"},
		{ToolUseID: "toolu_b", Content: "line 1\nline 2\n[image]", IsError: true},
	}
	if diff := cmp.Diff(want, x.toolResults); diff != "" {
		t.Errorf("toolResults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"Bash", "mcp__echo__echo"}, x.toolsOffered); diff != "" {
		t.Errorf("toolsOffered (-want +got):\n%s", diff)
	}
	if x.prompt != "new prompt" || x.turns != 1 || x.model != "claude-test-1" || x.stream {
		t.Errorf("prompt %q turns %d model %q stream %v", x.prompt, x.turns, x.model, x.stream)
	}
}

func TestDecodeErrors(t *testing.T) {
	for _, b := range []string{``, `{`, `[]`, `{"model":"m"}`, `{"messages":[{"role":"user","content":5}]}`} {
		if _, err := (anthropicWire{}).decode(nil, []byte(b)); err == nil {
			t.Errorf("decode(%q) succeeded", b)
		}
	}
}

func TestFindCwd(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want string
	}{
		{"system prompt", body(false, nil, "# Environment\n - Primary working directory: /home/u/proj\n - Is a git repository: false",
			msg("user", "hi")), "/home/u/proj"},
		{"system message (2.1.330)", body(false, nil, "sys",
			msg("user", "hi"), msg("system", "# Environment\n - Primary working directory: /tmp/ws \n")), "/tmp/ws"},
		{"bare", body(false, nil, "CWD: /srv/x y\nDate: 2026-11-22", msg("user", "hi")), "/srv/x y"},
		{"older env block", body(false, nil, "<env>\nWorking directory: /old\n</env>", msg("user", "hi")), "/old"},
		{"system message wins over the prompt", body(false, nil, "sys",
			msg("user", "Primary working directory: /wrong"), msg("system", "Primary working directory: /right")), "/right"},
		{"none", body(false, nil, "sys", msg("user", "hi")), ""},
		{"relative is ignored", body(false, nil, "Primary working directory: rel/dir", msg("user", "hi")), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := decodeAnthropic(t, tt.b).cwd; got != tt.want {
				t.Errorf("cwd %q, want %q", got, tt.want)
			}
		})
	}
}

func TestToolResolution(t *testing.T) {
	script := mustParse(t, `{"rules":[{"match":"","steps":[{"tools":[
		{"shell":"ls -la"},
		{"write":"hello.txt","content":"hi\n"},
		{"read":"/etc/hosts"},
		{"read":"~/notes"},
		{"name":"mcp__echo__echo","input":{"text":"ping"}},
		{"name":"Glob"}
	]}]}]}`)
	p, err := compile(script)
	if err != nil {
		t.Fatal(err)
	}
	type call struct {
		Name, Resolution string
		Input            any
	}
	tests := []struct {
		name    string
		offered []string
		cwd     string
		want    []call
	}{
		{"all offered", []string{"Bash", "Write", "Edit", "Read", "mcp__echo__echo", "Glob"}, "/w", []call{
			{"Bash", "shell:Bash", map[string]any{"command": "ls -la", "description": "Run ls -la"}},
			{"Write", "write:Write", map[string]any{"file_path": "/w/hello.txt", "content": "hi\n"}},
			{"Read", "read:Read", map[string]any{"file_path": "/etc/hosts"}},
			{"Read", "read:Read", map[string]any{"file_path": "~/notes"}},
			{"mcp__echo__echo", "name:mcp__echo__echo", map[string]any{"text": "ping"}},
			{"Glob", "name:Glob", map[string]any{}},
		}},
		{"bare: Edit instead of Write", []string{"Bash", "Edit", "Read"}, "/w", []call{
			{"Bash", "shell:Bash", map[string]any{"command": "ls -la", "description": "Run ls -la"}},
			{"Edit", "write:Edit", map[string]any{"file_path": "/w/hello.txt", "old_string": "", "new_string": "hi\n"}},
			{"Read", "read:Read", map[string]any{"file_path": "/etc/hosts"}},
			{"Read", "read:Read", map[string]any{"file_path": "~/notes"}},
			{"mcp__echo__echo", "name:mcp__echo__echo:not-offered", map[string]any{"text": "ping"}},
			{"Glob", "name:Glob:not-offered", map[string]any{}},
		}},
		{"nothing offered, no cwd", nil, "", []call{
			{"Bash", "shell:Bash:not-offered", map[string]any{"command": "ls -la", "description": "Run ls -la"}},
			{"Write", "write:Write:not-offered", map[string]any{"file_path": "hello.txt", "content": "hi\n"}},
			{"Read", "read:Read:not-offered", map[string]any{"file_path": "/etc/hosts"}},
			{"Read", "read:Read:not-offered", map[string]any{"file_path": "~/notes"}},
			{"mcp__echo__echo", "name:mcp__echo__echo:not-offered", map[string]any{"text": "ping"}},
			{"Glob", "name:Glob:not-offered", map[string]any{}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := p.resolve(&exchange{prompt: "x", toolsOffered: tt.offered, cwd: tt.cwd}, anthropicWire{}.tools())
			var got []call
			for _, c := range a.calls {
				var in any
				if err := json.Unmarshal(c.input, &in); err != nil {
					t.Fatal(err)
				}
				got = append(got, call{c.name, c.resolution, in})
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpansion(t *testing.T) {
	script := mustParse(t, `{"rules":[{"name":"r","match":"(?P<who>\\w+) says (\\w+)","steps":[{
		"thinking":"thinking about $2",
		"text":"${who}: $2 (all: $0)",
		"tools":[
			{"write":"$2.txt","content":"${who}\n"},
			{"shell":"echo $$HOME ${1}"},
			{"name":"tool_$2","input":{"arg":"$2","n":1.50,"list":["${who}",true],"$2":"key untouched"}}
		],
		"error":null
	}]},{"match":"fail (\\d+)","steps":[{"error":{"status":503,"message":"down for $1 s"}}]}]}`)
	p, _ := compile(script)
	a := p.resolve(&exchange{prompt: "well, alice says hello!", cwd: "/w"}, anthropicWire{}.tools())
	if a.rule != "r" || a.thinking != "thinking about hello" || a.text != "alice: hello (all: alice says hello)" {
		t.Errorf("rule %q thinking %q text %q", a.rule, a.thinking, a.text)
	}
	want := []any{
		map[string]any{"file_path": "/w/hello.txt", "content": "alice\n"},
		map[string]any{"command": "echo $HOME alice", "description": "Run echo $HOME alice"},
		map[string]any{"arg": "hello", "n": 1.50, "list": []any{"alice", true}, "$2": "key untouched"},
	}
	if len(a.calls) != 3 || a.calls[2].name != "tool_hello" {
		t.Fatalf("calls %+v", a.calls)
	}
	for i, w := range want {
		if diff := jsonDiff(t, w, a.calls[i].input); diff != "" {
			t.Errorf("call %d input (-want +got):\n%s", i, diff)
		}
	}
	a = p.resolve(&exchange{prompt: "fail 30"}, anthropicWire{}.tools())
	if a.err == nil || a.err.Status != 503 || a.err.Message != "down for 30 s" {
		t.Errorf("error %+v", a.err)
	}
}

func TestNoRuleAndExhausted(t *testing.T) {
	p, _ := compile(mustParse(t, `{"rules":[{"name":"only","match":"^go$","steps":[{"text":"one"}]}]}`))
	tools := anthropicWire{}.tools()
	if a := p.resolve(&exchange{prompt: "stop"}, tools); a.text != textNoRule || a.rule != "" {
		t.Errorf("no match: rule %q text %q", a.rule, a.text)
	}
	if a := p.resolve(&exchange{prompt: "go", turns: 1}, tools); a.text != textExhausted || a.rule != "only" || a.step != 1 {
		t.Errorf("exhausted: rule %q step %d text %q", a.rule, a.step, a.text)
	}
	p, _ = compile(&Script{Rules: []Rule{{Steps: []Step{{Text: "you said $0"}}}}})
	if a := p.resolve(&exchange{prompt: "anything\ngoes"}, tools); a.rule != "rules[0]" || a.text != "you said anything\ngoes" {
		t.Errorf("unnamed catch-all rule: rule %q text %q", a.rule, a.text)
	}
}

func TestDefaultScript(t *testing.T) {
	p, err := compile(DefaultScript())
	if err != nil {
		t.Fatal(err)
	}
	tools := anthropicWire{}.tools()
	offered := []string{"Bash", "Edit", "Read", "Write"}
	tests := []struct {
		prompt, rule string
		want         []string // per step: tool calls, then text
	}{
		{"write hello.txt, then run ls", "write-then-run", []string{
			"Write /w/hello.txt", "Bash ls", "text: Done: I wrote hello.txt and ran `ls`.", "text: " + textExhausted}},
		{"Write hello.txt then run ls -la.", "write-then-run", []string{
			"Write /w/hello.txt", "Bash ls -la", "text: Done: I wrote hello.txt and ran `ls -la`.", "text: " + textExhausted}},
		{"create notes.md and run cat notes.md", "write-then-run", []string{
			"Write /w/notes.md", "Bash cat notes.md", "text: Done: I wrote notes.md and ran `cat notes.md`.", "text: " + textExhausted}},
		{"now write out.txt, and then run `wc -c out.txt`", "write-then-run", []string{
			"Write /w/out.txt", "Bash wc -c out.txt", "text: Done: I wrote out.txt and ran `wc -c out.txt`.", "text: " + textExhausted}},
		{"run ls -1", "run", []string{"Bash ls -1", "text: Done: I ran `ls -1`.", "text: " + textExhausted, "text: " + textExhausted}},
		{"create report.txt.", "write", []string{"Write /w/report.txt", "text: Done: I wrote report.txt.", "text: " + textExhausted, "text: " + textExhausted}},
	}
	for _, tt := range tests {
		t.Run(tt.prompt, func(t *testing.T) {
			var got []string
			for i := range 4 {
				a := p.resolve(&exchange{prompt: tt.prompt, turns: i, toolsOffered: offered, cwd: "/w"}, tools)
				if a.rule != tt.rule {
					t.Fatalf("step %d: rule %q, want %q", i, a.rule, tt.rule)
				}
				for _, c := range a.calls {
					var in map[string]string
					if err := json.Unmarshal(c.input, &in); err != nil {
						t.Fatal(err)
					}
					got = append(got, c.name+" "+in["file_path"]+in["command"])
					if c.name == "Write" && in["content"] != "hello from drover\n" {
						t.Errorf("write content %q", in["content"])
					}
				}
				if a.text != "" {
					got = append(got, "text: "+a.text)
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("steps (-want +got):\n%s", diff)
			}
		})
	}
	// Prompts that merely mention writing or running stay with the catch-all.
	for _, prompt := range []string{"can you write a poem", "explain how to run the tests", "I want to create value"} {
		if a := p.resolve(&exchange{prompt: prompt}, tools); a.rule != "hello" {
			t.Errorf("%q matched rule %q, want the catch-all", prompt, a.rule)
		}
	}
	a := p.resolve(&exchange{prompt: "what is 2+2?"}, tools)
	if a.rule != "hello" || a.text != "Hello from fakemodel, drover's scripted model server. You said: what is 2+2?" {
		t.Errorf("catch-all: rule %q text %q", a.rule, a.text)
	}
}

func TestSplit(t *testing.T) {
	for _, s := range []string{"", "a", "one two", "the quick brown fox jumps over the lazy dog", "ünïcödé wörds hérè ok", "line\nbreaks\nonly"} {
		w := splitWords(s, 3)
		if strings.Join(w, "") != s || len(w) > 3 {
			t.Errorf("splitWords(%q) = %q", s, w)
		}
		r := splitRunes(s, 3)
		if strings.Join(r, "") != s || len(r) > 3 {
			t.Errorf("splitRunes(%q) = %q", s, r)
		}
		for _, c := range append(w, r...) {
			if !utf8.ValidString(c) {
				t.Errorf("chunk %q is not valid UTF-8", c)
			}
		}
	}
	if got := splitWords("the quick brown fox jumps over the lazy dog", 3); len(got) != 3 {
		t.Errorf("splitWords gave %d chunks, want 3: %q", len(got), got)
	}
}
