// Package schema reads the migrations a ledger backend embeds and decides
// which of them a ledger still needs. Each backend keeps its own files
// (SQL differs by dialect) and applies them in its own transaction.
package schema

import (
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
)

// Migration is one schema change, named "0001_init.sql": a positive
// version, an underscore, a name. A migration, once released, is never
// edited: a change is a new file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Load returns the migrations in directory dir of fsys, by version.
func Load(fsys fs.FS, dir string) ([]Migration, error) {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range ents {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must start with a positive number and _", e.Name())
		}
		b, err := fs.ReadFile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: e.Name(), SQL: string(b)})
	}
	if len(ms) == 0 {
		return nil, fmt.Errorf("no migrations in %s", dir)
	}
	slices.SortFunc(ms, func(a, b Migration) int { return a.Version - b.Version })
	for i := 1; i < len(ms); i++ {
		if ms[i].Version == ms[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s share a version", ms[i-1].Name, ms[i].Name)
		}
	}
	return ms, nil
}

// Apply runs apply, in order, for each migration of ms a ledger at
// version cur lacks (see Pending); apply runs the migration's SQL and
// records its version, in the transaction the caller holds.
func Apply(ms []Migration, cur int, apply func(Migration) error) error {
	pending, err := Pending(ms, cur)
	if err != nil {
		return err
	}
	for _, m := range pending {
		if err := apply(m); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return nil
}

// Pending returns the migrations of ms (by version) a ledger at version
// cur lacks, in order. A ledger newer than every migration is refused: a
// newer drover wrote it, and this one would misread it.
func Pending(ms []Migration, cur int) ([]Migration, error) {
	if latest := ms[len(ms)-1].Version; cur > latest {
		return nil, fmt.Errorf("ledger schema version %d is newer than this drover knows (%d): upgrade drover", cur, latest)
	}
	i := 0
	for i < len(ms) && ms[i].Version <= cur {
		i++
	}
	return ms[i:], nil
}
