package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/api"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/internal/config"
	"github.com/spf13/cobra"
)

func newAgentsCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "List the agents drover can run: installed, path, version, tested",
		Long: `List the agents drover can run: the built-in ones and the ACP agents added
with 'drover agents add', installed or not, their path and version, and
whether that version is one drover (or whoever added the agent) tested.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var list *api.AgentsResult
			var loadErr error
			if c, err := e.remote(""); err != nil {
				return err
			} else if c != nil {
				// The server's agents, on its machine.
				if list, err = c.Agents(cmd.Context(), api.AgentsParams{}); err != nil {
					return serviceError(err)
				}
			} else {
				// Load, not Registry: a configured agents file that cannot
				// be used is this command's error, after the built-ins it
				// lists.
				var reg *drover.Registry
				reg, loadErr = builtin.Load()
				list = api.AgentsOf(cmd.Context(), reg, e.log)
			}
			err := printList(e, asJSON, list.Agents, []string{"AGENT", "INSTALLED", "VERSION", "TESTED", "PATH"}, func(r api.AgentInfo) []string {
				inst, tested, ver, path := "no", "no (tested: "+r.TestedVersions+")", r.Version, r.Path
				if r.Installed {
					inst = "yes"
				}
				if r.Tested {
					tested = "yes"
				}
				if ver == "" {
					ver = "-"
				}
				if path == "" {
					path = r.Error
				}
				return []string{r.ID, inst, ver, tested, path}
			})
			if err != nil {
				return err
			}
			return loadErr
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per agent")
	cmd.AddCommand(newAgentsAddCmd(e), newAgentsRemoveCmd(e))
	return cmd
}

func newAgentsAddCmd(e *env) *cobra.Command {
	var (
		envs, tested, tiers, versionArgs []string
		openTimeout                      string
		force                            bool
	)
	cmd := &cobra.Command{
		Use:     "add NAME [flags] -- COMMAND [ARG...]",
		PreRunE: func(*cobra.Command, []string) error { return e.localOnly("agents add") },
		Short:   "Add an ACP agent: drover runs COMMAND ARG... and speaks ACP with it",
		Long: `Add an agent that speaks the Agent Client Protocol (ACP) on stdio, under
NAME: afterwards 'drover run -a NAME' runs it like a built-in agent, in
parallel runs, the ledger, the server and the dashboard. It is kept in
drover's config directory ($XDG_CONFIG_HOME/drover/agents.json, else
~/.config/drover/agents.json).

An ACP agent enforces what it does unasked itself: drover answers the
permission requests it sends and serves its file reads and writes only in
the run's directories. So NAME runs in tier autonomous only, unless --tier
names the tiers you trust it with (it asks before what they do not allow).`,
		Example: `  drover agents add claude-acp --tier supervised --tier autonomous -- npx @zed-industries/claude-code-acp
  drover agents add my-agent --env MY_AGENT_KEY=... --tested 1.4.2 -- /opt/my-agent/bin/agent --acp`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dash := cmd.ArgsLenAtDash(); dash >= 0 && dash != 1 {
				return usagef("usage: drover agents add NAME [flags] -- COMMAND [ARG...]")
			}
			name := args[0]
			if err := config.CheckName(name); err != nil {
				return usageError{err}
			}
			if builtin.IsBuiltin(name) {
				return usagef("%q is a built-in agent; choose another name", name)
			}
			a := config.Agent{Command: args[1], Args: args[2:], Tested: tested, VersionArgs: versionArgs, OpenTimeout: openTimeout}
			for _, kv := range envs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--env %q: want KEY=VALUE", kv)
				}
				if a.Env == nil {
					a.Env = map[string]string{}
				}
				a.Env[k] = v
			}
			for _, t := range tiers {
				tier, err := drover.ParseTier(t)
				if err != nil {
					return usageError{err}
				}
				a.Tiers = append(a.Tiers, tier)
			}
			if err := a.Check(); err != nil {
				return usageError{err}
			}
			path, agents, err := configured()
			if err != nil {
				return err
			}
			if _, ok := agents[name]; ok && !force {
				return fmt.Errorf("agent %q is already configured in %s (--force replaces it)", name, path)
			}
			agents[name] = a
			if err := config.SaveAgents(path, agents); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "drover: added agent %s (%s) in %s\n", name, strings.Join(append([]string{a.Command}, a.Args...), " "), path)
			if len(a.Tiers) == 0 {
				fmt.Fprintf(e.stderr, "drover: %s runs in tier autonomous only; --tier supervised (and others) if it asks before what a tier does not allow\n", name)
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringArrayVar(&envs, "env", nil, "KEY=VALUE added to the agent's environment (repeatable)")
	fl.StringArrayVar(&tested, "tested", nil, "a version of the agent known to work, shown as tested (repeatable)")
	fl.StringArrayVar(&tiers, "tier", nil, "a tier the agent is trusted to enforce (repeatable; default autonomous only)")
	fl.StringArrayVar(&versionArgs, "version-arg", nil, "an argument that makes the agent print its version (repeatable; default --version)")
	fl.StringVar(&openTimeout, "open-timeout", "", "how long the agent may take to start a session (default 1m)")
	fl.BoolVar(&force, "force", false, "replace an agent of that name")
	return cmd
}

func newAgentsRemoveCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:     "remove NAME",
		PreRunE: func(*cobra.Command, []string) error { return e.localOnly("agents remove") },
		Short:   "Remove an ACP agent added with 'drover agents add'",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if builtin.IsBuiltin(name) {
				return usagef("%q is a built-in agent; only agents added with 'drover agents add' can be removed", name)
			}
			path, agents, err := configured()
			if err != nil {
				return err
			}
			if _, ok := agents[name]; !ok {
				known := "none"
				if len(agents) > 0 {
					known = strings.Join(slices.Sorted(maps.Keys(agents)), ", ")
				}
				return fmt.Errorf("no agent %q in %s (configured: %s)", name, path, known)
			}
			delete(agents, name)
			if err := config.SaveAgents(path, agents); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "drover: removed agent %s from %s\n", name, path)
			return nil
		},
	}
}

// configured returns the agents file's path and the agents it holds; a
// file drover cannot use is an error naming it, and is never written over.
func configured() (string, map[string]config.Agent, error) {
	path, err := config.AgentsFile()
	if err != nil {
		return "", nil, err
	}
	agents, err := config.LoadAgents(path)
	return path, agents, err
}
