package fakemodel

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// Script decides every answer the server gives. Its JSON form is
//
//	{"rules":[{"name":"write-then-ls","match":"(?i)write (\\S+)","steps":[Step, Step, ...]}, ...]}
//
// A request is answered by the first rule whose Match matches the request's
// prompt (see [Request.Prompt]); which of its steps answers is derived from
// the request alone (see [Step]), so the server keeps no per-conversation
// state and a retried request gets the same answer. A prompt no rule matches
// is answered with the text "fakemodel: no rule matched the prompt".
//
// Strings in steps (text, thinking, tool arguments, string values inside a
// tool's input, error messages) may reference the rule's regexp submatches
// with [regexp.Regexp.Expand] syntax: $0 is the whole match, $1 or ${1} a
// numbered group, ${name} a named group; write $$ for a literal dollar sign
// (so a shell step "echo $$HOME" sends "echo $HOME").
type Script struct {
	Rules []Rule `json:"rules"`
}

// Rule is a prompt pattern and the model responses that follow it.
type Rule struct {
	// Name identifies the rule in the request log; the log says "rules[i]"
	// for an unnamed rule.
	Name string `json:"name,omitempty"`
	// Match is a Go regexp searched for in the request's prompt; "" matches
	// every prompt (and makes $0 the whole prompt). It is compiled when the
	// script is parsed.
	Match string `json:"match"`
	// APIKey, when set, restricts the rule to requests carrying this API
	// key (x-api-key, Authorization: Bearer, x-goog-api-key or ?key=), so a
	// script can answer one credential differently from another: a rate
	// limit for the first key, an answer for the second (failover tests).
	APIKey string `json:"apiKey,omitempty"`
	// Model, when set, restricts the rule to requests for this model
	// (exactly as the client names it): an overloaded model and its
	// fallback (failover tests).
	Model string `json:"model,omitempty"`
	// History, when set, is a Go regexp that one of the conversation's
	// user texts other than the prompt must match (see
	// [Request.UserTexts]): a rule for the turn after a compaction, whose
	// summary is such a text, or after a given earlier request.
	History string `json:"history,omitempty"`
	// Steps are the successive model responses of one conversation turn.
	Steps []Step `json:"steps"`
}

// Step is one model response.
//
// Which step answers a request is stateless: the step index is the number of
// assistant turns in the request after the prompt message (the last user
// message that carries text other than <system-reminder> blocks; a run of
// consecutive assistant messages counts as one turn). A fresh prompt is step
// 0; the request carrying the results of step 0's tool calls is step 1; and
// so on. Past the last step the server answers the plain text
// "fakemodel: script exhausted", so a test notices a conversation that went
// further than its script.
type Step struct {
	// Thinking, when set, is sent before anything else: a thinking block, a
	// reasoning item (summary), reasoning_content, or thought parts.
	Thinking string `json:"thinking,omitempty"`
	// Text is the assistant's text; streamed as a few deltas split on word
	// boundaries.
	Text string `json:"text,omitempty"`
	// Tools are tool calls, sent after the text; their presence makes the
	// default stop reason tool_use.
	Tools []ToolCall `json:"tools,omitempty"`
	// Error, when set, answers with this HTTP error instead of a message.
	// It cannot be combined with Thinking, Text, Tools or Cut.
	Error *HTTPError `json:"error,omitempty"`
	// DelayMs waits this long before answering. The wait ends early, and the
	// request is aborted without an answer, when the client goes away or the
	// server is closed.
	DelayMs int `json:"delayMs,omitempty"`
	// Cut applies to streaming requests only: the server sends the stream's
	// start and its first content delta (Gemini: its first chunk), then
	// aborts the connection without the stream's terminal event. A non-streaming request for the same step
	// gets the full answer (Claude Code retries a broken stream that way).
	Cut bool `json:"cut,omitempty"`
	// ChunkDelayMs pauses between streamed events, so a client can be
	// interrupted mid-answer.
	ChunkDelayMs int `json:"chunkDelayMs,omitempty"`
	// Usage is the token usage reported; nil means input 10, output 5.
	Usage *Usage `json:"usage,omitempty"`
	// StopReason overrides the stop reason sent to the client (Anthropic
	// default end_turn, or tool_use when Tools is non-empty; Chat
	// finish_reason stop / tool_calls; Gemini finishReason STOP). It is
	// passed through verbatim, so it is vendor-specific. The Responses API
	// has none: there it ends the stream with response.incomplete, with
	// incomplete_details.reason set to it.
	StopReason string `json:"stopReason,omitempty"`
}

// ToolCall is a tool call by intent, resolved against the tools the request
// offers, so one script drives every vendor. Exactly one intent must be set:
//
//	{"shell":"ls -la"}                        run a shell command
//	{"write":"hello.txt","content":"hi\n"}    create a file
//	{"read":"hello.txt"}                      read a file
//	{"name":"mcp__echo__echo","input":{...}}  call exactly that tool with that input (default {})
//
// The tools per vendor API (first offered wins):
//
//	       Anthropic        OpenAI Responses (Codex)                 Chat Completions (OpenCode)  Gemini
//	shell  Bash             exec_command, shell_command, shell        bash                         run_shell_command
//	write  Write, Edit      apply_patch (freeform patch), shell       write, edit                  write_file
//	read   Read             shell: cat PATH                           read                         read_file
//
// For Responses, a name "NS.TOOL" (or an MCP name mcp__SERVER__TOOL that
// is not offered as such) is called as TOOL in namespace NS.
//
// Each intent has a list of candidate tools per vendor API; the first one
// the request offers is called. When none is offered, the first candidate is
// called anyway (a model calling a missing tool is a useful test) and the
// request log records the resolution as not-offered. Relative write and read
// paths are joined to the working directory found in the request when there
// is one, because Claude Code's and OpenCode's file tools require absolute
// paths (Codex's are sent as written).
type ToolCall struct {
	Shell   string          `json:"shell,omitempty"`
	Write   string          `json:"write,omitempty"`
	Content string          `json:"content,omitempty"`
	Read    string          `json:"read,omitempty"`
	Name    string          `json:"name,omitempty"`
	Input   json.RawMessage `json:"input,omitempty"`
}

// HTTPError is a scripted HTTP error answer. The body has the vendor's error
// shape (OpenAI {"error":{"message","type","code","param"}} with
// "retry-after: 0" and "retry-after-ms: 0" on every error; Google
// {"error":{"code","message","status"}}); for Anthropic the error type
// follows the status: 400
// invalid_request_error, 401 authentication_error, 403 permission_error, 404
// not_found_error, 413 request_too_large, 429 rate_limit_error, 500
// api_error, 529 overloaded_error (other 4xx invalid_request_error, other 5xx
// api_error). 429 and 5xx answers carry the header "retry-after: 0".
type HTTPError struct {
	// Status is the HTTP status, 400 to 599.
	Status int `json:"status"`
	// Message is the error message; "" means "fakemodel: scripted error STATUS".
	Message string `json:"message,omitempty"`
}

// Usage is the token usage a step reports.
//
// Each field is sent as the vendor's own counter, verbatim:
//
//	          Anthropic                    OpenAI Responses                      Chat Completions                             Gemini
//	Input     input_tokens                 input_tokens                          prompt_tokens                                promptTokenCount
//	Output    output_tokens                output_tokens                         completion_tokens                            candidatesTokenCount
//	CacheRead cache_read_input_tokens      input_tokens_details.cached_tokens    prompt_tokens_details.cached_tokens          cachedContentTokenCount
//	CacheWrite cache_creation_input_tokens -                                     -                                            -
//	Reasoning -                            output_tokens_details.reasoning_tokens completion_tokens_details.reasoning_tokens thoughtsTokenCount
type Usage struct {
	Input      int `json:"input"`
	Output     int `json:"output"`
	CacheRead  int `json:"cacheRead"`
	CacheWrite int `json:"cacheWrite"`
	Reasoning  int `json:"reasoning,omitempty"`
}

// ParseScript decodes and validates a script. Decoding is strict: an unknown
// field is an error naming it, and so is trailing data. Validation: every
// rule's Match compiles and the rule has at least one step; every step has at
// least one of thinking, text, tools or error, and an error step nothing
// else but delayMs, usage and stopReason; a tool call has exactly one intent
// (content only with write, input only with name, input a JSON object);
// error statuses are 400..599; delays and usage are not negative. Errors name
// the offending rule, step and tool by index.
func ParseScript(data []byte) (*Script, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("fakemodel: parse script: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("fakemodel: parse script: trailing data after the script object")
	}
	if _, err := compile(&s); err != nil {
		return nil, err
	}
	return &s, nil
}

// LoadScript reads and parses the script file at path (see [ParseScript]).
func LoadScript(path string) (*Script, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("fakemodel: load script: %w", err)
	}
	s, err := ParseScript(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	return s, nil
}

//go:embed default.json
var defaultScriptJSON []byte

// DefaultScript returns a fresh copy of the built-in script that makes
// offline demos work:
//
//   - "write-then-run": "write hello.txt, then run ls" (also "write X then
//     run Y", "create X and run Y") writes X with "hello from drover\n",
//     then runs Y, then sums up in text;
//   - "run": "run X" runs X, then sums up;
//   - "write": "write X" / "create X" writes X, then sums up;
//   - "hello": any other prompt gets "Hello from fakemodel, drover's scripted
//     model server. You said: <prompt>".
func DefaultScript() *Script {
	s, err := ParseScript(defaultScriptJSON)
	if err != nil {
		panic("fakemodel: embedded default script is invalid: " + err.Error())
	}
	return s
}

// program is a validated, compiled script. It shares nothing mutable with
// the Script it came from, so a caller changing its Script afterwards does
// not race with the server.
type program struct {
	rules []compiledRule
}

type compiledRule struct {
	name    string
	re      *regexp.Regexp
	apiKey  string
	model   string
	history *regexp.Regexp // nil: any history
	steps   []Step
}

// compile validates s and compiles its regexps.
func compile(s *Script) (*program, error) {
	if s == nil {
		return nil, errors.New("fakemodel: nil script")
	}
	p := &program{rules: make([]compiledRule, 0, len(s.Rules))}
	for i, r := range s.Rules {
		where := fmt.Sprintf("rules[%d]", i)
		if r.Name != "" {
			where += fmt.Sprintf(" (%q)", r.Name)
		}
		match := r.Match
		if match == "" {
			match = `(?s).*` // matches everything too, but makes $0 the whole prompt
		}
		re, err := regexp.Compile(match)
		if err != nil {
			return nil, fmt.Errorf("fakemodel: script %s: bad match regexp: %w", where, err)
		}
		var history *regexp.Regexp
		if r.History != "" {
			if history, err = regexp.Compile(r.History); err != nil {
				return nil, fmt.Errorf("fakemodel: script %s: bad history regexp: %w", where, err)
			}
		}
		if len(r.Steps) == 0 {
			return nil, fmt.Errorf("fakemodel: script %s: no steps", where)
		}
		steps := make([]Step, len(r.Steps))
		for j, st := range r.Steps {
			if err := validateStep(&st); err != nil {
				return nil, fmt.Errorf("fakemodel: script %s.steps[%d]: %w", where, j, err)
			}
			steps[j] = cloneStep(st)
		}
		name := r.Name
		if name == "" {
			name = fmt.Sprintf("rules[%d]", i)
		}
		p.rules = append(p.rules, compiledRule{name: name, re: re, apiKey: r.APIKey, model: r.Model, history: history, steps: steps})
	}
	return p, nil
}

func validateStep(st *Step) error {
	if st.Thinking == "" && st.Text == "" && len(st.Tools) == 0 && st.Error == nil {
		return errors.New("empty step: set at least one of thinking, text, tools, error")
	}
	if st.Error != nil {
		if st.Thinking != "" || st.Text != "" || len(st.Tools) > 0 || st.Cut {
			return errors.New("an error step cannot also have thinking, text, tools or cut")
		}
		if st.Error.Status < 400 || st.Error.Status > 599 {
			return fmt.Errorf("error status %d is not in 400..599", st.Error.Status)
		}
	}
	if st.DelayMs < 0 || st.ChunkDelayMs < 0 {
		return errors.New("delayMs and chunkDelayMs cannot be negative")
	}
	if u := st.Usage; u != nil && (u.Input < 0 || u.Output < 0 || u.CacheRead < 0 || u.CacheWrite < 0 || u.Reasoning < 0) {
		return errors.New("usage cannot be negative")
	}
	for k, tc := range st.Tools {
		if err := validateToolCall(&tc); err != nil {
			return fmt.Errorf("tools[%d]: %w", k, err)
		}
	}
	return nil
}

func validateToolCall(tc *ToolCall) error {
	var intents []string
	if tc.Shell != "" {
		intents = append(intents, "shell")
	}
	if tc.Write != "" {
		intents = append(intents, "write")
	}
	if tc.Read != "" {
		intents = append(intents, "read")
	}
	if tc.Name != "" {
		intents = append(intents, "name")
	}
	switch len(intents) {
	case 0:
		return errors.New("no intent: set exactly one of shell, write, read, name")
	case 1:
	default:
		return fmt.Errorf("%d intents (%s and %s): set exactly one of shell, write, read, name",
			len(intents), strings.Join(intents[:len(intents)-1], ", "), intents[len(intents)-1])
	}
	if tc.Content != "" && tc.Write == "" {
		return errors.New("content is only valid with write")
	}
	if len(tc.Input) > 0 {
		if tc.Name == "" {
			return errors.New("input is only valid with name")
		}
		var obj map[string]any
		if err := json.Unmarshal(tc.Input, &obj); err != nil || obj == nil {
			return errors.New("input must be a JSON object")
		}
	}
	return nil
}

func cloneStep(st Step) Step {
	if st.Tools != nil {
		tools := make([]ToolCall, len(st.Tools))
		for i, tc := range st.Tools {
			tc.Input = bytes.Clone(tc.Input)
			tools[i] = tc
		}
		st.Tools = tools
	}
	if st.Error != nil {
		e := *st.Error
		st.Error = &e
	}
	if st.Usage != nil {
		u := *st.Usage
		st.Usage = &u
	}
	return st
}
