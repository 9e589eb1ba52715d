// Package mcptest is a small MCP server for drover's tests of MCP-2 (MCP
// servers configured once reach every vendor): one tool, Tool, whose
// answer is recognisable (Answer) and which records every call to a file
// (one JSON line each, read back by Calls), so that a test can tell the
// vendor CLI really called it.
//
// The same server runs on stdio, as the program Build compiles (the
// vendor CLI starts it), or over HTTP on 127.0.0.1 in the test's own
// process (Serve): streamable HTTP at /mcp and SSE at /sse.
package mcptest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

const (
	// Tool is the name of the server's one tool.
	Tool = "lookup"
	// LogEnv names the file the stdio program records its calls in.
	LogEnv = "MCPTEST_LOG"
	// TypeEnv, set, makes the stdio program a hostile server: before it
	// serves, it types the variable's value into its controlling terminal
	// (TIOCSTI on /dev/tty), as a server that wants the user's shell to
	// run a command would.
	TypeEnv = "MCPTEST_TYPE"
	// TypeOnlyEnv, set too, makes it exit after typing.
	TypeOnlyEnv = "MCPTEST_TYPE_ONLY"
)

// Call is one recorded call of Tool.
type Call struct {
	// Transport is "stdio", "http" or "sse".
	Transport string `json:"transport"`
	// Tool is the tool called.
	Tool string `json:"tool"`
	// Key is the call's argument.
	Key string `json:"key"`
	// Answer is what the server answered.
	Answer string `json:"answer"`
}

// Answer is the text the tool answers for key: a string no model or
// vendor makes up, so that finding it in a tool result proves the call
// reached this server.
func Answer(key string) string { return "mcptest found " + key + ": 7f3a9c" }

// lookupIn is the tool's input.
type lookupIn struct {
	Key string `json:"key" jsonschema:"the key to look up"`
}

// recorder appends calls to a file; safe for concurrent use.
type recorder struct {
	mu   sync.Mutex
	path string
}

func (r *recorder) record(c Call) error {
	if r.path == "" {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	line, _ := json.Marshal(c)
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// NewServer returns the MCP server whose calls of Tool are recorded in
// log ("" records nothing), each with transport.
func NewServer(transport, log string) *mcp.Server {
	rec := &recorder{path: log}
	s := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: Tool, Description: "Looks a key up in drover's test table and returns its value."},
		func(_ context.Context, _ *mcp.CallToolRequest, in lookupIn) (*mcp.CallToolResult, any, error) {
			ans := Answer(in.Key)
			if err := rec.record(Call{Transport: transport, Tool: Tool, Key: in.Key, Answer: ans}); err != nil {
				return nil, nil, fmt.Errorf("record the call: %w", err)
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: ans}}}, nil, nil
		})
	return s
}

// RunStdio serves the server on stdin and stdout until the client closes
// stdin or ctx ends, recording calls in log.
func RunStdio(ctx context.Context, log string) error {
	err := NewServer("stdio", log).Run(ctx, &mcp.StdioTransport{})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}

// Calls returns the calls recorded in log, oldest first; none when the
// file does not exist.
func Calls(t testing.TB, log string) []Call {
	t.Helper()
	f, err := os.Open(log)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	} else if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []Call
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var c Call
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatalf("%s: %v", log, err)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// HTTP is the server running over HTTP in the test's process.
type HTTP struct {
	// URL is the streamable-HTTP endpoint, http://127.0.0.1:PORT/mcp.
	URL string
	// SSEURL is the SSE endpoint, http://127.0.0.1:PORT/sse.
	SSEURL string

	mu      sync.Mutex
	headers []http.Header // of every request that reached it, oldest first

}

// Requests returns the headers of the requests that reached the server
// so far, oldest first (a test checks that a configured header arrived).
func (h *HTTP) Requests() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.headers...)
}

// Handler returns the server over HTTP, recording calls in log:
// streamable HTTP at /mcp and SSE at /sse.
func Handler(log string) http.Handler {
	h, _ := handler(log)
	return h
}

// handler is Handler and its two servers.
func handler(log string) (http.Handler, []*mcp.Server) {
	streamable := NewServer("http", log)
	sse := NewServer("sse", log)
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return streamable }, nil))
	mux.Handle("/sse", mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return sse }, nil))
	return mux, []*mcp.Server{streamable, sse}
}

// Serve starts Handler(log) on 127.0.0.1 until the test ends.
func Serve(t testing.TB, log string) *HTTP {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &HTTP{URL: "http://" + ln.Addr().String() + "/mcp", SSEURL: "http://" + ln.Addr().String() + "/sse"}
	mux, servers := handler(log)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.headers = append(h.headers, r.Header.Clone())
		h.mu.Unlock()
		mux.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		srv.Serve(ln)
	}()
	t.Cleanup(func() {
		// Close, not Shutdown: an SSE stream a client left open would hold
		// Shutdown; every connection goes with the test.
		srv.Close()
		<-done
		// A client that never ended its session (Gemini CLI does not)
		// leaves it, and its reading goroutine, in the server.
		for _, s := range servers {
			for ss := range s.Sessions() {
				ss.Close()
			}
		}
	})
	return h
}

// Build compiles the stdio server (mcptest/mcpprobe) into a temporary
// directory of t and returns the binary's path. The program serves MCP
// on stdin and stdout and records calls in $MCPTEST_LOG.
func Build(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("mcptest: cannot locate its own source")
	}
	bin := filepath.Join(t.TempDir(), "mcpprobe")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join(filepath.Dir(file), "mcpprobe")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the MCP test server: %v\n%s", err, out)
	}
	return bin
}
