package protocol

// Nested connections (MCP-1 inside a contained run): the protocol over a
// supervisor's nested-run endpoint (runs.Supervisor.ServeNested), whose
// client is a drover started inside a run — untrusted, since the run's
// agent controls it. The connection is confined to the run whose token it
// presents, by api.Confine.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
)

// Ops of a nested connection only.
const (
	// OpAuth is a nested connection's first request: {"op":"auth",
	// "token":…} with the run's runs.EnvRunToken.
	OpAuth = "auth"
)

// AuthParams are the fields of "auth".
type AuthParams struct {
	Token string `json:"token"`
}

// AuthResult is the result of "auth": the run the connection is confined
// to. Every run it starts is that run's child.
type AuthResult struct {
	RunID string `json:"runId"`
}

// authTimeout is how long a new nested connection has to authenticate.
const authTimeout = 10 * time.Second

// ServeNested serves one connection of the supervisor's nested-run
// endpoint; it is a runs.NestedHandler (sup.ServeNested(srv.ServeNested)).
// The first request must be "auth" with the token of a run going on
// (Config.Authenticate; within 10 s); anything else gets UNAUTHORIZED and
// the connection ends. Once authenticated, the connection speaks the
// protocol as Serve does over the service confined to that run
// (api.Confine): runs it starts are that run's children, within its
// bounds; it sees that run and its descendants; it answers no permission
// request; it subscribes to runs, not all. When the connection ends, the
// runs it started are cancelled (Conn's Shutdown). It returns once the
// connection has ended.
func (s *Server) ServeNested(ctx context.Context, conn net.Conn) {
	br := bufio.NewReaderSize(conn, 64<<10)
	_ = conn.SetReadDeadline(time.Now().Add(authTimeout))
	id, root, aerr := s.authenticate(br)
	_ = conn.SetReadDeadline(time.Time{})
	r := response{ID: id}
	if aerr != nil {
		r.Error = aerr
		s.log.Warn("nested connection refused", "err", aerr.Message)
	} else {
		r.Result = AuthResult{RunID: root}
	}
	line, _ := json.Marshal(r)
	_ = conn.SetWriteDeadline(time.Now().Add(authTimeout))
	_, werr := conn.Write(append(line, '\n'))
	_ = conn.SetWriteDeadline(time.Time{})
	if aerr != nil || werr != nil {
		return
	}
	c := s.newConn(api.Confine(s.svc, root, ""))
	c.confined = true
	_ = serveConn(ctx, c, readCloser{br, conn}, conn)
}

// readCloser reads through a buffer and closes the connection under it,
// so that Serve can interrupt a blocked read.
type readCloser struct {
	io.Reader
	io.Closer
}

// authenticate reads the first request of a nested connection and returns
// its id and the run its token belongs to.
func (s *Server) authenticate(br *bufio.Reader) (json.RawMessage, string, *api.Error) {
	line, err := br.ReadSlice('\n')
	if err != nil && len(bytes.TrimSpace(line)) == 0 || errors.Is(err, bufio.ErrBufferFull) {
		return nullID, "", errorf(api.CodeUnauthorized, "no auth request: the first line must be {\"id\":1,\"op\":\"auth\",\"token\":…} with the run's %s (%v)", runs.EnvRunToken, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return nullID, "", errorf(api.CodeUnauthorized, "the first line is not a JSON object: %s", jsonErr(err))
	}
	id, ok := fields["id"]
	if !ok || !validID(id) {
		id = nullID
	}
	var op string
	_ = json.Unmarshal(fields["op"], &op)
	if op != OpAuth {
		return id, "", errorf(api.CodeUnauthorized, "this socket serves the runs started from inside a run: the first request must be \"auth\" with the run's %s, not %q", runs.EnvRunToken, op)
	}
	delete(fields, "id")
	delete(fields, "op")
	params, _ := json.Marshal(fields)
	p, derr := decode[AuthParams](params)
	if derr != nil {
		return id, "", errorf(api.CodeUnauthorized, "auth: %v", derr)
	}
	if p.Token == "" {
		return id, "", errorf(api.CodeUnauthorized, "auth needs a token: the %s drover gave the run", runs.EnvRunToken)
	}
	var root string
	authenticated := false
	if s.cfg.Authenticate != nil {
		root, authenticated = s.cfg.Authenticate(p.Token)
	}
	if !authenticated {
		return id, "", errorf(api.CodeUnauthorized, "token refused: it is not the %s of a run this drover is running (the run may have ended)", runs.EnvRunToken)
	}
	return id, root, nil
}

// DialNested connects to a supervisor's nested-run endpoint at path (the
// runs.EnvSocket of a run) and authenticates with token (its
// runs.EnvRunToken). It returns the client, confined to that run, and the
// run's id. An unreachable socket (a drover that has gone, a stale path)
// and a refused token are errors naming the socket.
func DialNested(ctx context.Context, path, token string) (*Client, *AuthResult, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, nil, fmt.Errorf("reach the drover running this run at %s=%s: %w", runs.EnvSocket, path, err)
	}
	c := Dial(conn)
	var res AuthResult
	if err := c.do(ctx, OpAuth, AuthParams{Token: token}, &res); err != nil {
		_ = c.Close()
		return nil, nil, fmt.Errorf("authenticate at %s=%s: %w", runs.EnvSocket, path, err)
	}
	return c, &res, nil
}
