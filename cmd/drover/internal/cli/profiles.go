package cli

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/builtin"
	"github.com/drover-run/drover/internal/config"
	"github.com/spf13/cobra"
)

// profileInfo is one row of `drover profiles list`: never a secret value,
// only the names of the variables a profile sets.
type profileInfo struct {
	Name      string   `json:"name"`
	Agent     string   `json:"agent"`
	Env       []string `json:"env,omitempty"`
	ConfigDir string   `json:"configDir,omitempty"`
}

func newProfilesCmd(e *env) *cobra.Command {
	cmd := &cobra.Command{
		Use:               "profiles",
		PersistentPreRunE: localOnlyPreRun(e, "profiles"),
		Short:             "Credential profiles for failover: add, list, remove",
		Long: `Credential profiles are named accounts of an agent (an API key, or a vendor
configuration home someone logged in to), kept in drover's config directory
($XDG_CONFIG_HOME/drover/profiles.json, else ~/.config/drover/profiles.json,
mode 0600). A run names one or several with 'drover run --profile a,b': when
an attempt is rate limited, overloaded or refused before any tool ran, the
next profile is tried (docs/failover.md). Secrets never reach the ledger,
events or API responses; 'drover profiles list' shows variable names only.`,
	}
	cmd.AddCommand(newProfilesAddCmd(e), newProfilesListCmd(e), newProfilesRemoveCmd(e))
	return cmd
}

func newProfilesAddCmd(e *env) *cobra.Command {
	var (
		agent, configDir string
		envs, fromEnv    []string
		force            bool
	)
	cmd := &cobra.Command{
		Use:   "add NAME --agent AGENT (--from-env VAR | --env KEY=VALUE | --config-dir DIR)...",
		Short: "Add a credential profile",
		Long: `Add a credential profile NAME for AGENT. Its credentials are environment
variables the agent gets (--from-env copies a variable's current value from
drover's environment, so the secret stays out of your shell history; --env
takes it on the command line), or a vendor configuration home someone logged
in to (--config-dir).`,
		Example: `  ANTHROPIC_API_KEY=sk-ant-… drover profiles add work --agent claude --from-env ANTHROPIC_API_KEY
  drover profiles add team --agent claude --from-env ANTHROPIC_API_KEY=TEAM_ANTHROPIC_KEY
  drover profiles add other-login --agent codex --config-dir ~/.codex-other`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := config.CheckProfileName(name); err != nil {
				return usageError{err}
			}
			if agent == "" {
				return usagef("name the agent the credentials are for with --agent (see 'drover agents')")
			}
			if _, ok := builtin.Registry().Get(agent); !ok {
				return usagef("unknown agent %q (see 'drover agents')", agent)
			}
			p := config.Profile{Agent: agent}
			set := func(k, v string) {
				if p.Env == nil {
					p.Env = map[string]string{}
				}
				p.Env[k] = v
			}
			for _, kv := range envs {
				k, v, ok := strings.Cut(kv, "=")
				if !ok || k == "" {
					return usagef("--env %q: want KEY=VALUE", kv)
				}
				set(k, v)
			}
			for _, spec := range fromEnv {
				k, src, ok := strings.Cut(spec, "=")
				if !ok {
					src = k
				}
				v, found := os.LookupEnv(src)
				switch {
				case k == "" || src == "":
					return usagef("--from-env %q: want VAR or VAR=SOURCE_VAR", spec)
				case !found || v == "":
					return usagef("--from-env %s: $%s is not set in drover's environment", spec, src)
				}
				set(k, v)
			}
			if configDir != "" {
				abs, err := filepath.Abs(configDir)
				if err != nil {
					return usageError{err}
				}
				if st, err := os.Stat(abs); err != nil || !st.IsDir() {
					return usagef("--config-dir %s is not a directory", configDir)
				}
				p.ConfigDir = abs
			}
			if err := p.Check(); err != nil {
				return usagef("profile %s: %v (give --from-env, --env or --config-dir)", name, err)
			}
			path, profiles, err := configuredProfiles()
			if err != nil {
				return err
			}
			if _, ok := profiles[name]; ok && !force {
				return fmt.Errorf("profile %q already exists in %s (--force replaces it)", name, path)
			}
			profiles[name] = p
			if err := config.SaveProfiles(path, profiles); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "drover: added profile %s for %s in %s\n", name, agent, path)
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&agent, "agent", "a", "", "the agent the credentials are for")
	fl.StringArrayVar(&fromEnv, "from-env", nil, "VAR or VAR=SOURCE: store the current value of $VAR (or $SOURCE) as VAR (repeatable)")
	fl.StringArrayVar(&envs, "env", nil, "KEY=VALUE added to the agent's environment (repeatable; prefer --from-env)")
	fl.StringVar(&configDir, "config-dir", "", "a vendor configuration home holding a login, used as the run's --config-dir")
	fl.BoolVar(&force, "force", false, "replace a profile of that name")
	return cmd
}

func newProfilesListCmd(e *env) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the credential profiles (variable names, never their values)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, profiles, err := configuredProfiles()
			if err != nil {
				return err
			}
			rows := make([]profileInfo, 0, len(profiles))
			for _, name := range slices.Sorted(maps.Keys(profiles)) {
				p := profiles[name]
				rows = append(rows, profileInfo{Name: name, Agent: p.Agent, Env: slices.Sorted(maps.Keys(p.Env)), ConfigDir: p.ConfigDir})
			}
			return printList(e, asJSON, rows, []string{"PROFILE", "AGENT", "ENV", "CONFIG DIR"}, func(r profileInfo) []string {
				env, dir := strings.Join(r.Env, ","), r.ConfigDir
				if env == "" {
					env = "-"
				}
				if dir == "" {
					dir = "-"
				}
				return []string{r.Name, r.Agent, env, dir}
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "one JSON object per profile")
	return cmd
}

func newProfilesRemoveCmd(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a credential profile",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			path, profiles, err := configuredProfiles()
			if err != nil {
				return err
			}
			if _, ok := profiles[name]; !ok {
				known := "none"
				if len(profiles) > 0 {
					known = strings.Join(slices.Sorted(maps.Keys(profiles)), ", ")
				}
				return fmt.Errorf("no profile %q in %s (profiles: %s)", name, path, known)
			}
			delete(profiles, name)
			if err := config.SaveProfiles(path, profiles); err != nil {
				return err
			}
			fmt.Fprintf(e.stderr, "drover: removed profile %s from %s\n", name, path)
			return nil
		},
	}
}

// configuredProfiles returns the profiles file's path and the profiles it
// holds; a file drover cannot use is an error naming it, and is never
// written over.
func configuredProfiles() (string, map[string]config.Profile, error) {
	path, err := config.ProfilesFile()
	if err != nil {
		return "", nil, err
	}
	profiles, err := config.LoadProfiles(path)
	return path, profiles, err
}

// resolveProfiles returns the profiles of names from drover's profiles
// file, with their secrets: how a worker and a server run the profiles a
// run names.
func resolveProfiles(names []string) ([]drover.Profile, error) {
	path, err := config.ProfilesFile()
	if err != nil {
		return nil, err
	}
	return config.ResolveProfiles(path, names)
}
