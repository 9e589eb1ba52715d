// Package config is where drover keeps its configuration, and what it
// keeps there: the ACP agents added by configuration (ACP-1), in
// agents.json.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"

	"github.com/drover-run/drover"
	"github.com/drover-run/drover/internal/private"
)

// Dir returns drover's configuration directory: $XDG_CONFIG_HOME/drover,
// else ~/.config/drover. It does not create it.
func Dir() (string, error) {
	base := os.Getenv("XDG_CONFIG_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("drover's config directory: set XDG_CONFIG_HOME or HOME: %w", err)
		}
		base = filepath.Join(home, ".config")
	}
	return filepath.Join(base, "drover"), nil
}

// WorkerIDFile returns the path of the file that keeps this machine's
// worker id (drover worker): worker-id in Dir.
func WorkerIDFile() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "worker-id"), nil
}

// Keep keeps drover's configuration directory and the files drover writes
// in it (the agents, profiles and worker id files) private to its user
// (BND-3), as private.Keep does: one of another user is an error, a mode
// something changed is set back to 0700 or 0600 and the repair logged to
// log. Other files there are the user's, and left as they are. Without a
// configuration directory (no HOME) there is nothing to keep.
func Keep(log *slog.Logger) error {
	dir, err := Dir()
	if err != nil {
		return nil
	}
	if err := private.Keep(dir, "config directory", log); err != nil {
		return err
	}
	for _, file := range []func() (string, error){AgentsFile, ProfilesFile, WorkerIDFile} {
		path, err := file()
		if err != nil {
			return err
		}
		if err := private.Keep(path, "config file", log); err != nil {
			return err
		}
	}
	return nil
}

// AgentsFile returns the path of the agents file: agents.json in Dir.
func AgentsFile() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "agents.json"), nil
}

// Agent is one ACP agent as agents.json stores it, under its name.
type Agent struct {
	// Command is the executable: a path, or a name looked up on PATH.
	Command string `json:"command"`
	// Args are its arguments: what makes it speak ACP on stdio.
	Args []string `json:"args,omitempty"`
	// Env is added to its environment.
	Env map[string]string `json:"env,omitempty"`
	// Tested are the versions the user vouches for (drover agents shows
	// them tested).
	Tested []string `json:"tested,omitempty"`
	// Tiers are the tiers the agent is trusted to enforce (it asks before
	// what they do not allow); none means autonomous only.
	Tiers []drover.Tier `json:"tiers,omitempty"`
	// VersionArgs make it print its version; none means --version.
	VersionArgs []string `json:"versionArgs,omitempty"`
	// OpenTimeout bounds how long it may take to answer initialize and
	// start its session, as a duration ("30s"); empty means drover's
	// default.
	OpenTimeout string `json:"openTimeout,omitempty"`
}

// file is the JSON form of agents.json.
type file struct {
	Agents map[string]Agent `json:"agents"`
}

// nameRe is what an agent's name may be: it names an adapter on the
// command line, in the ledger and in environment variables.
var nameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)

// CheckName returns an error unless name can name an agent: lower-case
// letters, digits, ".", "_" and "-", starting with a letter or digit, at
// most 64 characters.
func CheckName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("agent name %q: use lower-case letters, digits, '.', '_' and '-' (starting with a letter or digit)", name)
	}
	return nil
}

// Check returns what is wrong with a, or nil.
func (a Agent) Check() error {
	if a.Command == "" {
		return errors.New("no command")
	}
	for _, t := range a.Tiers {
		if _, err := drover.ParseTier(string(t)); err != nil {
			return err
		}
	}
	if a.OpenTimeout != "" {
		if d, err := time.ParseDuration(a.OpenTimeout); err != nil || d <= 0 {
			return fmt.Errorf("openTimeout %q: want a positive duration such as \"30s\"", a.OpenTimeout)
		}
	}
	return nil
}

// Timeout returns OpenTimeout as a duration, 0 when unset or invalid
// (Check says which).
func (a Agent) Timeout() time.Duration {
	d, _ := time.ParseDuration(a.OpenTimeout)
	return max(d, 0)
}

// LoadAgents reads the agents file at path, by name: none when it does
// not exist. A file that cannot be read, is not one JSON object of the
// expected fields, or has an agent that is badly named or incomplete is
// an error naming path and what to do; no agent of it is returned then,
// so that none is silently left out.
func LoadAgents(path string) (map[string]Agent, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Agent{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("agents file %s: %w", path, err)
	}
	var f file
	if err := decodeStrict(bytes.NewReader(data), "agents file "+path, &f); err != nil {
		return nil, err
	}
	if err := checkEntries(f.Agents, "agents file "+path, "agent", CheckName, "drover agents remove"); err != nil {
		return nil, err
	}
	if f.Agents == nil {
		f.Agents = map[string]Agent{}
	}
	return f.Agents, nil
}

// SaveAgents writes agents to the agents file at path, replacing it
// whole: created with mode 0600 (its directory 0700), written to a
// temporary file first and renamed, so that a reader never sees half a
// file.
func SaveAgents(path string, agents map[string]Agent) error {
	if agents == nil {
		agents = map[string]Agent{}
	}
	data, err := json.MarshalIndent(file{Agents: agents}, "", "  ")
	if err != nil {
		return err
	}
	if err := writePrivate(path, append(data, '\n')); err != nil {
		return fmt.Errorf("agents file %s: %w", path, err)
	}
	return nil
}

// decodeStrict decodes one JSON object of r into v: an unknown field, a
// bad value or data after the object is an error starting with what.
func decodeStrict(r io.Reader, what string, v any) error {
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("%s: %w (fix it, or remove it to start over)", what, err)
	}
	if dec.More() {
		return fmt.Errorf("%s: data after its JSON object (fix it, or remove it to start over)", what)
	}
	return nil
}

// checkEntries checks every entry of a file read by name, in name order:
// its name with checkName and its value with Check. The error says what,
// the kind of entry and how to remove a bad one.
func checkEntries[T interface{ Check() error }](m map[string]T, what, kind string, checkName func(string) error, remove string) error {
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if err := checkName(name); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := m[name].Check(); err != nil {
			return fmt.Errorf("%s: %s %q: %w (fix it, or %s %s)", what, kind, name, err, remove, name)
		}
	}
	return nil
}
