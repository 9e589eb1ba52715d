package cli

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/runs"
	"github.com/drover-run/drover/server"
	"github.com/drover-run/drover/store"
	"github.com/spf13/cobra"
)

// Every command about runs talks to an api.Service (API-2): the HTTP API
// of a `drover serve` named by --server (or DROVER_SERVER, with the token
// of DROVER_TOKEN), else a local one over the ledger (--db). The output,
// exit statuses and errors are the same either way: the service says
// what happened, and this file says it as the CLI does.

// ServerEnv names the environment variable that, like --server, makes the
// CLI talk to a drover serve.
const ServerEnv = "DROVER_SERVER"

// remote returns the client of the server the command talks to, or nil
// when it works on a ledger of its own. A --db given with a server is a
// usage error: the server has its ledger.
func (e *env) remote(db string) (*server.Client, error) {
	if e.server == "" {
		return nil, nil
	}
	if db != "" {
		return nil, usagef("--db and --server exclude each other: the server records in its own ledger")
	}
	c, err := server.NewClient(e.server, os.Getenv("DROVER_TOKEN"))
	if err != nil {
		return nil, usagef("%v", err)
	}
	return c, nil
}

// localOnly refuses --server for a command that works on this machine.
func (e *env) localOnly(command string) error {
	if e.server != "" {
		return usagef("drover %s works on this machine: it does not take --server (or %s)", command, ServerEnv)
	}
	return nil
}

// withService runs fn with the service of the command: the server's, or
// a supervisor of this process over the ledger db with cfg (created when
// missing if create, else it must exist: errNoLedger). Serving over the
// nested-run socket, the local supervisor lets a drover started inside
// its runs start children.
func (e *env) withService(ctx context.Context, db string, create bool, cfg runs.Config, fn func(api.Service) error) error {
	c, err := e.remote(db)
	if err != nil {
		return err
	}
	if c != nil {
		if err := c.Connect(ctx); err != nil {
			return serviceError(err)
		}
		return fn(c)
	}
	local := func(sup *runs.Supervisor, _ store.Store) error {
		// The person at this terminal is the operator of a local service:
		// the autonomous tier is theirs to ask for (a server's operator
		// decides for its clients: drover serve --allow-autonomous).
		return fn(api.NewLocal(sup, api.Config{Logger: e.log, AllowAutonomous: true}))
	}
	if create {
		return e.withLedger(ctx, db, cfg, local)
	}
	st, loc, err := e.openLedger(ctx, db, true)
	if err != nil {
		return err
	}
	defer st.Close()
	return e.supervise(ctx, st, loc, cfg, local)
}

// withRunService is withService (an existing ledger, one run at a time)
// for a command about the runs ids: if one is not known to the service,
// it fails with a usage error before doing anything, and creates no
// ledger.
func (e *env) withRunService(ctx context.Context, db string, ids []string, fn func(api.Service) error) error {
	err := e.withService(ctx, db, false, runs.Config{Limit: 1}, func(svc api.Service) error {
		for _, id := range ids {
			if _, err := svc.Get(ctx, api.GetParams{RunID: id, RecordOnly: true}); err != nil {
				return notFound("run", id, err)
			}
		}
		return fn(svc)
	})
	if errors.Is(err, errNoLedger) {
		return notFound("run", ids[0], store.ErrNotFound)
	}
	return err
}

// lineError is an error said in one line, with exit status 2, and no
// usage hint: the server could not be reached, refused the token, or
// speaks another version.
type lineError struct{ msg string }

func (e lineError) Error() string { return e.msg }

// serviceError says a service's error as the CLI does: a request the
// service refuses as invalid, or about a run it does not know, is a usage
// error (exit 2); a server that cannot be reached, refuses the token or
// speaks another version, one line (exit 2); anything else a failure
// (exit 1). The message is the service's, the same in both modes.
func serviceError(err error) error {
	var e *api.Error
	if !errors.As(err, &e) {
		return err
	}
	switch e.Code {
	case server.CodeUnreachable, server.CodeUnauthorized, api.CodeIncompatible:
		return lineError{e.Message}
	case api.CodeInvalidRequest, api.CodeValidation, api.CodeBoundaryViolation, api.CodeNotFound:
		return usageError{errors.New(e.Message)}
	}
	return errors.New(e.Message)
}

// notFound turns a service's or the store's "not found" for the kind
// ("run", "session") named id into a usage error that says where to
// look; other errors are said as serviceError says them.
func notFound(kind, id string, err error) error {
	var e *api.Error
	if !errors.Is(err, store.ErrNotFound) && !(errors.As(err, &e) && e.Code == api.CodeNotFound) {
		return serviceError(err)
	}
	see := "drover ps --all"
	if kind == "session" {
		see = "drover sessions"
	}
	return usagef("no %s %q in the ledger (see '%s')", kind, id, see)
}

// runRecord is run id's record, as the service has it now.
func runRecord(ctx context.Context, svc api.Service, id string) (*store.Run, error) {
	g, err := svc.Get(ctx, api.GetParams{RunID: id, RecordOnly: true})
	if err != nil {
		return nil, err
	}
	return g.Run, nil
}

// describeServer names where the runs are, for messages: the server, or
// the ledger.
func (e *env) describeServer() string {
	if e.server != "" {
		return fmt.Sprintf("the drover server at %s", e.server)
	}
	return "the ledger"
}

// localOnlyPreRun is the PersistentPreRunE of a command that works on this
// machine: it sets up the root's flags, then refuses --server.
func localOnlyPreRun(e *env, command string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if root := cmd.Root(); root.PersistentPreRunE != nil {
			if err := root.PersistentPreRunE(cmd, args); err != nil {
				return err
			}
		}
		return e.localOnly(command)
	}
}
