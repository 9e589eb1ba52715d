package fakemodel

// This file is the vendor-neutral half of the server: from the neutral view
// of a request (exchange, filled by a wire's decode) and the script, it
// decides what to answer (answer, encoded by a wire). Nothing here knows a
// wire format; vendor specifics enter only through the toolTable a wire
// supplies.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

const (
	textNoRule    = "fakemodel: no rule matched the prompt"
	textExhausted = "fakemodel: script exhausted"
)

// exchange is the vendor-neutral view of one model request.
type exchange struct {
	model  string
	stream bool
	// prompt is the text the rules are matched against.
	prompt string
	// turns is the number of assistant turns after the prompt message: the
	// index of the step that answers.
	turns        int
	userTexts    []string
	toolsOffered []string
	toolResults  []ToolResult
	// cwd is the client's working directory when the request reveals it.
	cwd string
	// apiKey is the API key the request carries ("" for none).
	apiKey string
	// aux, when set, marks an auxiliary request the client makes besides
	// the conversation (OpenCode's title request, Gemini's routing
	// classifier): it is answered with auxText, not from the script, and
	// logged with this kind.
	aux, auxText string
}

// historyMatches reports whether a user text of the conversation other
// than the prompt matches re.
func (x *exchange) historyMatches(re *regexp.Regexp) bool {
	skipped := false
	for i := len(x.userTexts) - 1; i >= 0; i-- {
		t := x.userTexts[i]
		if !skipped && t == x.prompt {
			skipped = true // the prompt itself, the latest of them
			continue
		}
		if re.MatchString(t) {
			return true
		}
	}
	return false
}

// answer is what to reply, decided from the script.
type answer struct {
	rule       string
	step       int
	thinking   string
	text       string
	calls      []toolUse
	err        *HTTPError
	delay      time.Duration
	chunkDelay time.Duration
	cut        bool
	usage      Usage
	// stopReason overrides the wire's default stop reason when not "".
	stopReason string
}

// toolUse is a tool call resolved to one of the offered tools.
type toolUse struct {
	name string
	// input is the tool's JSON input; for a custom (freeform) tool, a JSON
	// string holding the freeform text.
	input  json.RawMessage
	custom bool
	// resolution says how the intent was resolved, for the request log:
	// "intent:tool", with ":not-offered" appended when the request did not
	// offer the tool.
	resolution string
}

// toolArgs are the arguments of a shell, write or read intent, after
// submatch expansion.
type toolArgs struct {
	command string
	// path is the path as the script gives it; absPath is path joined to the
	// request's working directory when path is relative and a working
	// directory was found, else path.
	path, absPath string
	content       string
}

// toolCandidate is a vendor tool that can carry out an intent.
type toolCandidate struct {
	name  string
	input func(toolArgs) any
	// custom marks a freeform tool (OpenAI's custom tools, such as Codex's
	// apply_patch): input returns the text as a string.
	custom bool
}

// toolTable lists, per intent, a vendor API's candidate tools in order of
// preference.
type toolTable struct {
	shell, write, read []toolCandidate
}

// resolve decides the answer to x.
func (p *program) resolve(x *exchange, tools toolTable) *answer {
	a := &answer{step: x.turns, usage: Usage{Input: 10, Output: 5}}
	for _, r := range p.rules {
		if r.apiKey != "" && r.apiKey != x.apiKey {
			continue
		}
		if r.model != "" && r.model != x.model {
			continue
		}
		if r.history != nil && !x.historyMatches(r.history) {
			continue
		}
		m := r.re.FindStringSubmatchIndex(x.prompt)
		if m == nil {
			continue
		}
		a.rule = r.name
		if x.turns >= len(r.steps) {
			a.text = textExhausted
			return a
		}
		st := &r.steps[x.turns]
		expand := func(t string) string {
			if !strings.Contains(t, "$") {
				return t
			}
			return string(r.re.ExpandString(nil, t, x.prompt, m))
		}
		a.thinking = expand(st.Thinking)
		a.text = expand(st.Text)
		for _, tc := range st.Tools {
			a.calls = append(a.calls, resolveCall(tc, expand, x, tools))
		}
		if st.Error != nil {
			msg := st.Error.Message
			if msg == "" {
				msg = fmt.Sprintf("fakemodel: scripted error %d", st.Error.Status)
			}
			a.err = &HTTPError{Status: st.Error.Status, Message: expand(msg)}
		}
		a.delay = time.Duration(st.DelayMs) * time.Millisecond
		a.chunkDelay = time.Duration(st.ChunkDelayMs) * time.Millisecond
		a.cut = st.Cut
		if st.Usage != nil {
			a.usage = *st.Usage
		}
		a.stopReason = st.StopReason
		return a
	}
	a.text = textNoRule
	return a
}

// resolveCall turns a scripted call into a call of one of the offered tools.
func resolveCall(tc ToolCall, expand func(string) string, x *exchange, tools toolTable) toolUse {
	if tc.Name != "" {
		name := expand(tc.Name)
		input := json.RawMessage(`{}`)
		if len(tc.Input) > 0 {
			input = expandJSON(tc.Input, expand)
		}
		return toolUse{name: name, input: input, resolution: resolution("name", name, x)}
	}
	var (
		intent     string
		candidates []toolCandidate
		args       toolArgs
	)
	switch {
	case tc.Shell != "":
		intent, candidates = "shell", tools.shell
		args.command = expand(tc.Shell)
	case tc.Write != "":
		intent, candidates = "write", tools.write
		args.path = expand(tc.Write)
		args.content = expand(tc.Content)
	default:
		intent, candidates = "read", tools.read
		args.path = expand(tc.Read)
	}
	args.absPath = joinCwd(x.cwd, args.path)
	if len(candidates) == 0 {
		// The wire has no tool for this intent at all; call a tool named for
		// the intent so the failure shows up in the client and the log.
		in, _ := json.Marshal(map[string]string{"command": args.command, "path": args.absPath, "content": args.content})
		return toolUse{name: intent, input: in, resolution: intent + ":" + intent + ":not-offered"}
	}
	chosen := candidates[0]
	for _, c := range candidates {
		if slices.Contains(x.toolsOffered, c.name) {
			chosen = c
			break
		}
	}
	in, err := json.Marshal(chosen.input(args))
	if err != nil {
		panic("fakemodel: marshal tool input: " + err.Error()) // inputs are plain structs of strings
	}
	return toolUse{name: chosen.name, input: in, custom: chosen.custom, resolution: resolution(intent, chosen.name, x)}
}

func resolution(intent, tool string, x *exchange) string {
	r := intent + ":" + tool
	if !slices.Contains(x.toolsOffered, tool) {
		r += ":not-offered"
	}
	return r
}

// expandJSON applies expand to every string value (not to keys) in the
// JSON document raw, which validation guarantees is an object.
func expandJSON(raw json.RawMessage, expand func(string) string) json.RawMessage {
	if !bytes.Contains(raw, []byte("$")) {
		return raw
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return raw
	}
	var walk func(any) any
	walk = func(v any) any {
		switch t := v.(type) {
		case string:
			return expand(t)
		case []any:
			for i := range t {
				t[i] = walk(t[i])
			}
		case map[string]any:
			for k := range t {
				t[k] = walk(t[k])
			}
		}
		return v
	}
	out, err := json.Marshal(walk(v))
	if err != nil {
		return raw
	}
	return out
}

// cwdPatterns find the client's working directory in request texts: Claude
// Code's environment section ("Primary working directory: /path"; in a
// mid-conversation system message since 2.1.330, in the system prompt
// before), its --bare system prompt ("CWD: /path"), older versions' and
// OpenCode's "Working directory: /path", Codex's <cwd>/path</cwd>, and the
// first of Gemini CLI's "Workspace Directories" in its <session_context>.
var cwdPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?m)Primary working directory:[ \t]*(\S[^\r\n]*?)[ \t]*\r?$`),
	regexp.MustCompile(`(?m)^CWD:[ \t]*(\S[^\r\n]*?)[ \t]*\r?$`),
	regexp.MustCompile(`(?m)Working directory:[ \t]*(\S[^\r\n]*?)[ \t]*\r?$`),
	regexp.MustCompile(`<cwd>\s*([^<\r\n]+?)\s*</cwd>`),
	regexp.MustCompile(`(?m)Workspace Directories:\**[ \t]*\r?\n[ \t]*-[ \t]*(\S[^\r\n]*?)[ \t]*\r?$`),
}

// findCwd returns the absolute working directory the first revealing text
// reveals, or "".
func findCwd(texts []string) string {
	for _, t := range texts {
		for _, re := range cwdPatterns {
			if m := re.FindStringSubmatch(t); m != nil && isAbs(m[1]) {
				return m[1]
			}
		}
	}
	return ""
}

func isAbs(p string) bool {
	if strings.HasPrefix(p, "/") || strings.HasPrefix(p, `\`) {
		return true
	}
	// Windows drive path, C:\ or C:/.
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') &&
		('a' <= p[0]|0x20 && p[0]|0x20 <= 'z')
}

// joinCwd joins a relative p to cwd; p is returned unchanged when it is
// absolute or home-relative, or when cwd is unknown.
func joinCwd(cwd, p string) string {
	if p == "" || cwd == "" || isAbs(p) || strings.HasPrefix(p, "~") {
		return p
	}
	if strings.Contains(cwd, `\`) && !strings.Contains(cwd, "/") {
		return strings.TrimRight(cwd, `\`) + `\` + p
	}
	return path.Join(cwd, p)
}

// splitWords splits s into about n chunks that end after a space or
// newline; the chunks concatenate to s. Short texts stay whole.
func splitWords(s string, n int) []string {
	var out []string
	rest := s
	for i := n; i > 1; i-- {
		target := len(rest) / i
		j := strings.IndexAny(rest[target:], " \n")
		if j < 0 {
			break
		}
		cut := target + j + 1
		if cut >= len(rest) {
			break
		}
		out = append(out, rest[:cut])
		rest = rest[cut:]
	}
	return append(out, rest)
}

// splitRunes splits s into about n chunks of similar length on rune
// boundaries; the chunks concatenate to s.
func splitRunes(s string, n int) []string {
	var out []string
	rest := s
	for i := n; i > 1; i-- {
		cut := len(rest) / i
		for cut < len(rest) && !utf8.RuneStart(rest[cut]) {
			cut++
		}
		if cut == 0 || cut >= len(rest) {
			break
		}
		out = append(out, rest[:cut])
		rest = rest[cut:]
	}
	return append(out, rest)
}

// injectedBlock reports whether a user text is context the client injected
// rather than words the user typed: one whole <tag>…</tag> block (Codex's
// <environment_context> and <user_instructions>, Gemini CLI's
// <session_context>), or Codex's "# AGENTS.md instructions for …" block.
func injectedBlock(text string) bool {
	t := strings.TrimSpace(text)
	if strings.HasPrefix(t, "# AGENTS.md instructions for ") {
		return true
	}
	if len(t) < 3 || t[0] != '<' {
		return false
	}
	end := strings.IndexAny(t, " >\n")
	if end < 2 || t[end] == '\n' {
		return false
	}
	tag := t[1:end]
	for _, r := range tag {
		if !(r == '_' || r == '-' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return strings.HasSuffix(t, "</"+tag+">")
}

// turnCounter counts the model turns after the prompt: a run of
// consecutive model messages (or output items) is one turn, ended by
// anything the client sends back (tool results, a user message).
type turnCounter struct {
	turns  int
	inTurn bool
}

// model records a model message or item.
func (c *turnCounter) model() {
	if !c.inTurn {
		c.turns++
	}
	c.inTurn = true
}

// client records a message or item from the client side.
func (c *turnCounter) client() { c.inTurn = false }

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./,:=+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellWrite is a shell command that writes content to path exactly, for
// clients that have a shell tool but no file-writing tool.
func shellWrite(path, content string) string {
	return "printf '%s' " + shellQuote(content) + " > " + shellQuote(path)
}

// titleOf makes a short title from a prompt: its first line, at most 50
// characters.
func titleOf(prompt string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(prompt), "\n")
	if r := []rune(line); len(r) > 50 {
		line = strings.TrimSpace(string(r[:50])) + "…"
	}
	if line == "" {
		return "Fakemodel session"
	}
	return line
}
