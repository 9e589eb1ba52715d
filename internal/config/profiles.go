package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/drover-run/drover"
)

// ProfilesFile returns the path of the credential profiles file:
// profiles.json in Dir.
func ProfilesFile() (string, error) {
	dir, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "profiles.json"), nil
}

// Profile is one credential profile as profiles.json stores it, under its
// name (FAIL-1): what an agent needs to use one account. Env values are
// secrets; the file is the only place drover keeps them.
type Profile struct {
	// Agent is the agent the credentials are for (an id or alias).
	Agent string `json:"agent"`
	// Env is added to the agent's environment: an API key.
	Env map[string]string `json:"env,omitempty"`
	// ConfigDir is a vendor configuration home to run in: one a user
	// logged in to (claude /login, codex login).
	ConfigDir string `json:"configDir,omitempty"`
}

// Check returns what is wrong with p, or nil.
func (p Profile) Check() error {
	if p.Agent == "" {
		return errors.New("no agent")
	}
	if len(p.Env) == 0 && p.ConfigDir == "" {
		return errors.New("no credentials: give it environment variables or a configuration home")
	}
	for k := range p.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("environment variable name %q", k)
		}
	}
	if p.ConfigDir != "" && !filepath.IsAbs(p.ConfigDir) {
		return fmt.Errorf("configDir %q is not an absolute path", p.ConfigDir)
	}
	return nil
}

// Drover returns the profile named name in the form a run takes.
func (p Profile) Drover(name string) drover.Profile {
	return drover.Profile{Name: name, Agent: p.Agent, Env: maps.Clone(p.Env), ConfigDir: p.ConfigDir}
}

// profilesFile is the JSON form of profiles.json.
type profilesFile struct {
	Profiles map[string]Profile `json:"profiles"`
}

// LoadProfiles reads the profiles file at path, by name: none when it
// does not exist. A file that others than its owner may read or write is
// refused (it holds secrets), and so is one that is not one JSON object of
// the expected fields or has a badly named or incomplete profile: the
// error names path and what to do, and no profile of it is returned.
func LoadProfiles(path string) (map[string]Profile, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]Profile{}, nil
	} else if err != nil {
		return nil, fmt.Errorf("profiles file %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("profiles file %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("profiles file %s: mode %04o lets others read the secrets it holds (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	var pf profilesFile
	if err := decodeStrict(f, "profiles file "+path, &pf); err != nil {
		return nil, err
	}
	if err := checkEntries(pf.Profiles, "profiles file "+path, "profile", CheckProfileName, "drover profiles remove"); err != nil {
		return nil, err
	}
	if pf.Profiles == nil {
		pf.Profiles = map[string]Profile{}
	}
	return pf.Profiles, nil
}

// CheckProfileName returns an error unless name can name a profile: the
// same characters as an agent's name.
func CheckProfileName(name string) error {
	if !nameRe.MatchString(name) {
		return fmt.Errorf("profile name %q: use lower-case letters, digits, '.', '_' and '-' (starting with a letter or digit)", name)
	}
	return nil
}

// SaveProfiles writes profiles to the profiles file at path, replacing it
// whole, as SaveAgents does: mode 0600 in a 0700 directory, through a
// temporary file renamed over it.
func SaveProfiles(path string, profiles map[string]Profile) error {
	if profiles == nil {
		profiles = map[string]Profile{}
	}
	data, err := json.MarshalIndent(profilesFile{Profiles: profiles}, "", "  ")
	if err != nil {
		return err
	}
	if err := writePrivate(path, append(data, '\n')); err != nil {
		return fmt.Errorf("profiles file %s: %w", path, err)
	}
	return nil
}

// ResolveProfiles returns the profiles of names from the file at path, in
// that order, in the form a run takes; an unknown name is an error naming
// the profiles there are.
func ResolveProfiles(path string, names []string) ([]drover.Profile, error) {
	all, err := LoadProfiles(path)
	if err != nil {
		return nil, err
	}
	out := make([]drover.Profile, 0, len(names))
	for _, n := range names {
		p, ok := all[n]
		if !ok {
			known := "none; add one with 'drover profiles add'"
			if len(all) > 0 {
				known = strings.Join(slices.Sorted(maps.Keys(all)), ", ")
			}
			return nil, fmt.Errorf("no profile %q in %s (profiles: %s)", n, path, known)
		}
		out = append(out, p.Drover(n))
	}
	return out, nil
}

// writePrivate writes data to path so that only its owner may read it and
// a reader never sees half a file: a 0600 temporary file in the same
// directory (created 0700 when missing), renamed over path.
func writePrivate(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // gone after the rename; a leftover on failure
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
