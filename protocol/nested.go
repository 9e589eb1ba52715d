package protocol

// Nested connections (MCP-1 inside a contained run): the protocol over a
// supervisor's nested-run endpoint (runs.Supervisor.ServeNested), whose
// client is a drover started inside a run — untrusted, since the run's
// agent controls it. The connection is confined to the run whose token it
// presents: this file is where that is enforced.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"runtime/debug"
	"slices"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/contain"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/store"
)

// Ops of a nested connection only.
const (
	// OpAuth is a nested connection's first request: {"op":"auth",
	// "token":…} with the run's runs.EnvRunToken.
	OpAuth = "auth"
	// OpAgents lists the agents the supervisor can run.
	OpAgents = "agents"
)

// CodeUnauthorized: a nested connection's first request was not "auth"
// with the token of a run going on; the server closes the connection
// after this response.
const CodeUnauthorized = "UNAUTHORIZED"

// AuthParams are the fields of "auth".
type AuthParams struct {
	Token string `json:"token"`
}

// AuthResult is the result of "auth": the run the connection is confined
// to. Every run it starts is that run's child.
type AuthResult struct {
	RunID string `json:"runId"`
}

// AgentsResult is the result of "agents".
type AgentsResult struct {
	Agents []AgentInfo `json:"agents"`
}

// AgentInfo is one agent of the supervisor's registry: whether its CLI is
// installed (on the supervisor's machine) and the tiers it can enforce.
type AgentInfo struct {
	ID        string        `json:"id"`
	Installed bool          `json:"installed"`
	Version   string        `json:"version,omitempty"`
	Tested    bool          `json:"tested"`
	Error     string        `json:"error,omitempty"`
	Tiers     []drover.Tier `json:"tiers"`
}

// authTimeout is how long a new nested connection has to authenticate.
const authTimeout = 10 * time.Second

// scope is what a nested connection is confined to: run root and its
// descendants.
type scope struct {
	root string
}

// ServeNested serves one connection of the supervisor's nested-run
// endpoint; it is a runs.NestedHandler (sup.ServeNested(srv.ServeNested)).
// The first request must be "auth" with the token of a run of the
// supervisor that is going on (within 10 s); anything else gets
// UNAUTHORIZED and the connection ends. Once authenticated, the
// connection speaks the protocol as Serve does, confined to that run:
//
//   - "run" starts a child of that run, never one elsewhere (a parent
//     other than it is BOUNDARY_VIOLATION), never above its tier, less
//     contained than it, or with a vendor config home outside the
//     directories it may write (BOUNDARY_VIOLATION), with only the options
//     an agent may choose for a child (no fork, session, resume token,
//     environment, binary, MCP servers, allowed tools or permission
//     rules: VALIDATION_ERROR); Start's BND-1 and BND-3 checks apply;
//   - "get", "events", "list" (its parent by default the run) and
//     "subscribe" (runs, not all) see that run and its descendants;
//     "await", "cancel", "steer" and "interrupt" act on its
//     descendants; any other run is NOT_FOUND;
//   - "respond" is refused: an agent never answers its own children's
//     permission requests; "agents" lists the supervisor's agents.
//
// When the connection ends, the runs it started are cancelled (Conn's
// Shutdown). It returns once the connection has ended.
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
	c := s.NewConn()
	c.scope = &scope{root: root}
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
func (s *Server) authenticate(br *bufio.Reader) (json.RawMessage, string, *Error) {
	line, err := br.ReadSlice('\n')
	if err != nil && len(bytes.TrimSpace(line)) == 0 || errors.Is(err, bufio.ErrBufferFull) {
		return nullID, "", errorf(CodeUnauthorized, "no auth request: the first line must be {\"id\":1,\"op\":\"auth\",\"token\":…} with the run's %s (%v)", runs.EnvRunToken, err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil || fields == nil {
		return nullID, "", errorf(CodeUnauthorized, "the first line is not a JSON object: %s", jsonErr(err))
	}
	id, ok := fields["id"]
	if !ok || !validID(id) {
		id = nullID
	}
	var op string
	_ = json.Unmarshal(fields["op"], &op)
	if op != OpAuth {
		return id, "", errorf(CodeUnauthorized, "this socket serves the runs started from inside a run: the first request must be \"auth\" with the run's %s, not %q", runs.EnvRunToken, op)
	}
	delete(fields, "id")
	delete(fields, "op")
	params, _ := json.Marshal(fields)
	p, derr := decode[AuthParams](params)
	if derr != nil {
		return id, "", errorf(CodeUnauthorized, "auth: %v", derr)
	}
	if p.Token == "" {
		return id, "", errorf(CodeUnauthorized, "auth needs a token: the %s drover gave the run", runs.EnvRunToken)
	}
	root, ok := s.sup.TokenRun(p.Token)
	if !ok {
		return id, "", errorf(CodeUnauthorized, "token refused: it is not the %s of a run this drover is running (the run may have ended)", runs.EnvRunToken)
	}
	return id, root, nil
}

// lookup returns the handler of op on c: the confined ones on a nested
// connection.
func (c *Conn) lookup(op string) (opFunc, bool) {
	if c.scope != nil {
		h, ok := scopedOps[op]
		return h, ok
	}
	h, ok := ops[op]
	return h, ok
}

var scopedOps map[string]opFunc

func init() {
	scopedOps = map[string]opFunc{
		OpAuth: func(*Conn, context.Context, []byte) (any, error) {
			return nil, errorf(CodeConflict, "this connection is already authenticated")
		},
		OpRun: (*Conn).nestedRun,
		OpAwait: confined(func(c *Conn, ctx context.Context, p AwaitParams) error {
			return c.within(ctx, true, append([]string{p.RunID}, p.Runs...)...)
		}, (*Server).Await),
		OpCancel: confined(func(c *Conn, ctx context.Context, p RunIDParams) error {
			return c.within(ctx, true, p.RunID)
		}, (*Server).Cancel),
		OpGet: confined(func(c *Conn, ctx context.Context, p GetParams) error {
			if p.SessionID != "" {
				return errorf(CodeValidation, "a nested connection gets runs, not sessions")
			}
			return c.within(ctx, false, p.RunID)
		}, (*Server).Get),
		OpList: func(c *Conn, ctx context.Context, params []byte) (any, error) {
			p, err := decode[ListParams](params)
			if err != nil {
				return nil, err
			}
			if p.Parent == "" {
				p.Parent = c.scope.root
			}
			if err := c.within(ctx, false, p.Parent); err != nil {
				return nil, err
			}
			return c.s.List(ctx, p)
		},
		OpEvents: confined(func(c *Conn, ctx context.Context, p EventsParams) error {
			return c.within(ctx, false, p.RunID)
		}, (*Server).Events),
		OpSubscribe: func(c *Conn, ctx context.Context, params []byte) (any, error) {
			p, err := decode[SubscribeParams](params)
			if err != nil {
				return nil, err
			}
			if p.All {
				return nil, errorf(CodeValidation, "a nested connection subscribes to runs, not all")
			}
			if err := c.within(ctx, false, p.Runs...); err != nil {
				return nil, err
			}
			return c.subscribe(ctx, params)
		},
		OpUnsubscribe: (*Conn).unsubscribe,
		OpRespond: func(*Conn, context.Context, []byte) (any, error) {
			return nil, errorf(CodeBoundaryViolation, "a nested connection cannot answer permission requests: an agent never approves its own children's tools (drover approve, the dashboard)")
		},
		OpSteer: confined(func(c *Conn, ctx context.Context, p SteerParams) error {
			return c.within(ctx, true, p.RunID)
		}, (*Server).Steer),
		OpInterrupt: confined(func(c *Conn, ctx context.Context, p InterruptParams) error {
			return c.within(ctx, true, p.RunID)
		}, (*Server).Interrupt),
		OpAgents: op((*Server).Agents),
	}
}

// confined adapts a Server method to a nested connection: check refuses
// what is outside the connection's run.
func confined[P, R any](check func(*Conn, context.Context, P) error, f func(*Server, context.Context, P) (R, error)) opFunc {
	return func(c *Conn, ctx context.Context, params []byte) (any, error) {
		p, err := decode[P](params)
		if err != nil {
			return nil, err
		}
		if err := check(c, ctx, p); err != nil {
			return nil, err
		}
		return f(c.s, ctx, p)
	}
}

// within checks that every run of ids is a descendant of the connection's
// run, or (unless strict) that run itself: NOT_FOUND for any other, as if
// it did not exist; BOUNDARY_VIOLATION for the run itself when strict.
// Empty ids are left to the op to refuse.
func (c *Conn) within(ctx context.Context, strict bool, ids ...string) error {
	root := c.scope.root
	for _, id := range ids {
		if id == "" {
			continue
		}
		if id == root {
			if strict {
				return errorf(CodeBoundaryViolation, "run %s is the run this connection works for: a nested client acts on its descendants only", root)
			}
			continue
		}
		seen := map[string]bool{}
		for cur := id; cur != root; {
			r, err := c.s.st.GetRun(ctx, cur)
			if errors.Is(err, store.ErrNotFound) || err == nil && (r.ParentID == "" || seen[r.ParentID]) {
				return errorf(CodeNotFound, "no run %q under run %s (a nested connection sees only the runs started from inside its run)", id, root)
			} else if err != nil {
				return toError(err)
			}
			seen[cur] = true
			cur = r.ParentID
		}
	}
	return nil
}

// nestedRun starts a child of the connection's run, within its bounds
// (see ServeNested), and remembers it: Shutdown cancels it.
func (c *Conn) nestedRun(ctx context.Context, params []byte) (any, error) {
	p, err := decode[RunParams](params)
	if err != nil {
		return nil, err
	}
	root := c.scope.root
	switch {
	case p.Agent == "":
		return nil, errorf(CodeValidation, "agent is required")
	case p.Parent != "" && p.Parent != root:
		return nil, errorf(CodeBoundaryViolation, "a run started from inside run %s is its child: parent %s is refused", root, p.Parent)
	case p.Fork != "":
		return nil, errorf(CodeValidation, "a nested connection cannot fork a run: start a new one")
	}
	var opts drover.Options
	if p.Options != nil {
		opts = *p.Options
	}
	if err := nestedOptions(opts); err != nil {
		return nil, err
	}
	parent, err := c.s.st.GetRun(ctx, root)
	if err != nil {
		return nil, toError(err)
	}
	// Only what bounds the child is read: options recorded by another
	// drover version may have fields this one does not know.
	var po struct {
		Tier      drover.Tier `json:"tier"`
		Contain   *bool       `json:"contain"`
		Cwd       string      `json:"cwd"`
		AddDirs   []string    `json:"addDirs"`
		ConfigDir string      `json:"configDir"`
	}
	if len(parent.Options) > 0 {
		if err := json.Unmarshal(parent.Options, &po); err != nil {
			return nil, errorf(CodeInternal, "the options of run %s: %v", root, err)
		}
	}
	pt := drover.DefaultTier
	if po.Tier != "" {
		// A tier this drover does not know is taken for the lowest.
		pt = drover.TierSandbox
		if t, err := drover.ParseTier(string(po.Tier)); err == nil {
			pt = t
		}
	}
	if opts.Tier != "" {
		t, err := drover.ParseTier(string(opts.Tier))
		if err != nil {
			return nil, errorf(CodeValidation, "%v", err)
		}
		if rank(t) > rank(pt) {
			return nil, errorf(CodeBoundaryViolation, "tier %s is above %s, the tier of run %s: a nested run never has more permissions than its parent; ask for %s or less", t, pt, root, pt)
		}
		opts.Tier = t
	} else if rank(drover.DefaultTier) > rank(pt) {
		opts.Tier = pt
	}
	parentOn, _ := drover.Options{Tier: pt, Contain: po.Contain}.Containment()
	if on, explicit := opts.Containment(); parentOn && !on {
		if explicit {
			return nil, errorf(CodeBoundaryViolation, "run %s is contained: a run started from inside it is contained too (contain: false is refused)", root)
		}
		yes := true
		opts.Contain = &yes
	}
	if opts.ConfigDir != "" {
		// Start lets a run's vendor config home lie anywhere (it is the
		// run's own state), and a contained run may write it: a client
		// inside the parent would get a directory to write that its own
		// run may not. So a nested run's must be one its parent may write.
		parentOpts := drover.Options{Cwd: po.Cwd, AddDirs: po.AddDirs}
		cwd, dirs := parentOpts.WorkDirs()
		allowed := append([]string{cwd}, dirs...)
		if po.ConfigDir != "" {
			allowed = append(allowed, po.ConfigDir)
		}
		base := opts.Cwd
		if base == "" {
			base = cwd
		}
		cd := opts.ConfigDir
		if !filepath.IsAbs(cd) {
			cd = filepath.Join(base, cd)
		}
		cd = contain.Resolve(cd)
		if !slices.ContainsFunc(allowed, func(a string) bool { return contain.Within(cd, contain.Resolve(a)) }) {
			return nil, errorf(CodeBoundaryViolation, "configDir %s is outside the directories run %s may write (%v): a run started from inside it gets no other directory to write", cd, root, allowed)
		}
	}
	started, err := c.s.sup.Start(ctx, runs.StartRequest{Agent: p.Agent, Prompt: p.Prompt, Options: opts, ParentID: root})
	if err != nil {
		return nil, startError(err)
	}
	c.mu.Lock()
	c.started = append(c.started, started.RunID)
	c.mu.Unlock()
	return &started, nil
}

// nestedOptions refuses the options an agent may not choose for a child:
// those that continue another conversation, change what runs or with
// which environment, or allow tools without anybody asked.
func nestedOptions(o drover.Options) error {
	var refused []string
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"sessionId", o.SessionID != ""}, {"resume", o.Resume != ""}, {"fork", o.Fork},
		{"env", len(o.Env) > 0}, {"binary", o.Binary != ""}, {"mcpServers", len(o.MCPServers) > 0},
		{"allowedTools", len(o.AllowedTools) > 0}, {"permissionRules", len(o.PermissionRules) > 0},
		{"failover", o.Failover != nil}, // its profiles are environments and config homes
	} {
		if f.set {
			refused = append(refused, f.name)
		}
	}
	if len(refused) > 0 {
		return errorf(CodeValidation, "a run started from inside a run cannot set %v", refused)
	}
	return nil
}

// rank orders the tiers from sandbox (0) to autonomous (3).
func rank(t drover.Tier) int { return slices.Index(drover.Tiers(), t) }

// Agents lists the agents of the supervisor's registry with their
// availability (each CLI's --version, checked now) and tiers. An agent
// whose check fails or panics is listed with the error.
func (s *Server) Agents(ctx context.Context, _ struct{}) (*AgentsResult, error) {
	reg := s.sup.Registry()
	out := &AgentsResult{Agents: []AgentInfo{}}
	for _, id := range reg.List() {
		a, ok := reg.Get(id)
		if !ok {
			continue
		}
		out.Agents = append(out.Agents, agentInfo(ctx, s, a))
	}
	return out, nil
}

func agentInfo(ctx context.Context, s *Server, a drover.Adapter) (info AgentInfo) {
	info = AgentInfo{ID: a.ID(), Tiers: []drover.Tier{}}
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("agents: availability check panicked", "agent", a.ID(), "panic", p, "stack", string(debug.Stack()))
			info.Installed, info.Error = false, fmt.Sprintf("drover: internal error checking %s: %v", a.ID(), p)
		}
	}()
	if tiers := a.Capabilities().Tiers; tiers != nil {
		info.Tiers = tiers
	}
	av := a.Available(ctx)
	info.Installed, info.Version, info.Tested, info.Error = av.Installed, av.Version, av.Tested, av.Error
	return info
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
