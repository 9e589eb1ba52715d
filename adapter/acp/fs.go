package acp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	acpsdk "github.com/coder/acp-go-sdk"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/internal/jsonrpc"
)

// fsRequest is fs/read_text_file's or fs/write_text_file's params.
type fsRequest struct {
	SessionID string  `json:"sessionId"`
	Path      string  `json:"path"`
	Content   *string `json:"content"`
	Line      *int    `json:"line"`
	Limit     *int    `json:"limit"`
}

// fsCheck returns why drover refuses the file request r of method, or
// "": a path outside the run's directories, or of another session, or any
// file access in sandbox, or a write in dry-run.
func (c *Conversation) fsCheck(method string, r fsRequest) string {
	switch {
	case r.SessionID != "" && c.sessionID != "" && r.SessionID != c.sessionID:
		return fmt.Sprintf("session %q is not this run's", r.SessionID)
	case c.sess.Tier == drover.TierSandbox:
		return "the run's tier (sandbox) allows no file access"
	case method == acpsdk.ClientMethodFsWriteTextFile && c.sess.Tier == drover.TierDryRun:
		return "the run's tier (dry-run) allows no writes"
	case !filepath.IsAbs(r.Path):
		return fmt.Sprintf("path %q is not absolute", r.Path)
	case !contain.InRoots(r.Path, c.roots):
		return fmt.Sprintf("%s is outside the run's directories", r.Path)
	}
	return ""
}

// refuse answers a file request with an error and reports it as
// "<agent>:fs_refused".
func (c *Conversation) refuse(m jsonrpc.Message, raw []byte, code int, why string) []drover.Event {
	c.out = append(c.out, rpc.Error(m.ID, code, "drover: "+why)...)
	ev := c.Extension("fs_refused", raw)
	ev.Metadata = map[string]any{"reason": why}
	return []drover.Event{ev}
}

// readTextFile serves fs/read_text_file inside the run's directories:
// the file's text, from line (1-based) on, at most limit lines.
func (c *Conversation) readTextFile(m jsonrpc.Message, raw []byte) []drover.Event {
	var r fsRequest
	if err := json.Unmarshal(m.Params, &r); err != nil {
		return c.refuse(m, raw, jsonrpc.CodeInvalidParams, "unreadable params: "+err.Error())
	}
	if why := c.fsCheck(m.Method, r); why != "" {
		return c.refuse(m, raw, jsonrpc.CodeInvalidParams, why)
	}
	data, err := os.ReadFile(r.Path)
	if errors.Is(err, os.ErrNotExist) {
		return c.refuse(m, raw, codeNotFound, r.Path+": no such file")
	} else if err != nil {
		return c.refuse(m, raw, jsonrpc.CodeInternal, err.Error())
	}
	c.out = append(c.out, rpc.Result(m.ID, acpsdk.ReadTextFileResponse{Content: lines(string(data), r.Line, r.Limit)})...)
	return nil
}

// lines returns the lines of s from line (1-based; nil: the first) on, at
// most limit of them (nil: all), each with its newline.
func lines(s string, line, limit *int) string {
	if line == nil && limit == nil {
		return s
	}
	all := strings.SplitAfter(s, "\n")
	from := 0
	if line != nil && *line > 1 {
		from = min(*line-1, len(all))
	}
	to := len(all)
	if limit != nil && *limit >= 0 {
		to = min(from+*limit, to)
	}
	return strings.Join(all[from:to], "")
}

// writeTextFile serves fs/write_text_file inside the run's directories,
// creating the file (and its directories) when missing; a tier that
// allows no writes refuses it.
func (c *Conversation) writeTextFile(m jsonrpc.Message, raw []byte) []drover.Event {
	var r fsRequest
	if err := json.Unmarshal(m.Params, &r); err != nil || r.Content == nil {
		return c.refuse(m, raw, jsonrpc.CodeInvalidParams, "params need a path and content")
	}
	if why := c.fsCheck(m.Method, r); why != "" {
		return c.refuse(m, raw, jsonrpc.CodeInvalidParams, why)
	}
	if err := os.MkdirAll(filepath.Dir(r.Path), 0o755); err != nil {
		return c.refuse(m, raw, jsonrpc.CodeInternal, err.Error())
	}
	if err := os.WriteFile(r.Path, []byte(*r.Content), 0o644); err != nil {
		return c.refuse(m, raw, jsonrpc.CodeInternal, err.Error())
	}
	c.out = append(c.out, rpc.Result(m.ID, acpsdk.WriteTextFileResponse{})...)
	return nil
}
