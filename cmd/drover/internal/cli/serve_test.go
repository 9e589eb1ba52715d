package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// PRO-1: `drover serve --stdio` answers requests on stdout, keeps going
// after malformed lines, and exits 0 at the end of its input.
func TestPRO1_ServeStdio(t *testing.T) {
	db := filepath.Join(t.TempDir(), "drover.db")
	in := strings.Join([]string{
		`{"id":1,"op":"list"}`,
		`not json`,
		`{"id":2,"op":"get","runId":"run_nope"}`,
		`{"id":3,"op":"run","agent":"nosuch","prompt":"hi"}`,
	}, "\n") + "\n"
	var out, errOut strings.Builder
	if code := Run(context.Background(), []string{"serve", "--stdio", "--db", db}, strings.NewReader(in), &out, &errOut); code != ExitOK {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	got := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var r struct {
			ID     json.RawMessage
			Result json.RawMessage
			Error  *struct{ Code string }
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		got[string(r.ID)] = "ok"
		if r.Error != nil {
			got[string(r.ID)] = r.Error.Code
		}
	}
	want := map[string]string{"1": "ok", "null": "INVALID_REQUEST", "2": "NOT_FOUND", "3": "VALIDATION_ERROR"}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("id %s: %q, want %q (output %s)", id, got[id], w, out.String())
		}
	}
}

// wideningOptions are run options that take a run beyond its tier, which
// only a server's operator may allow (SEC-5); each is a client's JSON.
var wideningOptions = []string{
	`{"tier":"autonomous"}`,
	`{"tier":"supervised","contain":false}`,
	`{"permissionRules":["allow:*"]}`,
	`{"binary":"/bin/true"}`,
	`{"env":{"LD_PRELOAD":"/tmp/x.so"}}`,
	`{"failover":{"profiles":[{"name":"p","agent":"claude","env":{"NODE_OPTIONS":"--require /tmp/x.js"}}]}}`,
}

// SEC-5: drover serve --stdio refuses every option that would widen a run
// beyond its tier (BOUNDARY_VIOLATION) unless --allow-autonomous; a
// supervised run with a narrow allow rule passes.
func TestSEC5_ServeStdioGatesWideningOptions(t *testing.T) {
	t.Setenv("DROVER_CLAUDE_BIN", "/bin/true")
	for _, allow := range []bool{false, true} {
		var in strings.Builder
		for i, o := range append(slices.Clone(wideningOptions), `{"permissionRules":["allow:Read"]}`) {
			fmt.Fprintf(&in, `{"id":%d,"op":"check","agent":"claude","prompt":"x","options":%s}`+"\n", i, o)
		}
		args := []string{"serve", "--stdio", "--db", filepath.Join(t.TempDir(), "drover.db")}
		if allow {
			args = append(args, "--allow-autonomous")
		}
		var out, errOut strings.Builder
		if code := Run(context.Background(), args, strings.NewReader(in.String()), &out, &errOut); code != ExitOK {
			t.Fatalf("exit %d: %s", code, errOut.String())
		}
		for _, l := range strings.Split(strings.TrimSpace(out.String()), "\n") {
			var r struct {
				ID    int
				Error *struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatalf("not JSON: %q", l)
			}
			refused := r.Error != nil && r.Error.Code == "BOUNDARY_VIOLATION"
			if want := !allow && r.ID < len(wideningOptions); refused != want {
				t.Errorf("allow-autonomous %v, options %d: refused %v, want %v: %s", allow, r.ID, refused, want, l)
			}
		}
	}
}

// SEC-5: a secret given as a flag (a token, a URL with a password, --env
// of a credential) is in
// drover's command line for every process to read: drover says so and
// names the variable to use; a flag without one is not warned about.
func TestSEC5_SecretOnTheCommandLineWarned(t *testing.T) {
	var out, errOut strings.Builder
	Run(context.Background(), []string{"ps", "--db", "postgres://drover:pw@127.0.0.1:1/none?connect_timeout=1"}, strings.NewReader(""), &out, &errOut)
	if !strings.Contains(errOut.String(), "warning: --db holds a secret") {
		t.Errorf("--db with a password: %q", errOut.String())
	}
	errOut.Reset()
	Run(context.Background(), []string{"run", "--db", filepath.Join(t.TempDir(), "drover.db"), "--env", "GITHUB_TOKEN=ghp-x", "-a", "nosuch", "p"}, strings.NewReader(""), &out, &errOut)
	if !strings.Contains(errOut.String(), "warning: --env holds a secret") || strings.Contains(errOut.String(), "ghp-x") {
		t.Errorf("--env of a credential: %q", errOut.String())
	}
	errOut.Reset()
	Run(context.Background(), []string{"ps", "--db", filepath.Join(t.TempDir(), "drover.db")}, strings.NewReader(""), &out, &errOut)
	if strings.Contains(errOut.String(), "warning") {
		t.Errorf("--db with a path: %q", errOut.String())
	}
}
