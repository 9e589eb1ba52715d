package drover

import (
	"fmt"
	"slices"
	"sync"
)

// Registry maps adapter ids and aliases to adapters. Safe for concurrent use.
type Registry struct {
	mu       sync.RWMutex
	adapters map[string]Adapter
	aliases  map[string]string // alias → id
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{adapters: map[string]Adapter{}, aliases: map[string]string{}}
}

// Register adds a under a.ID() and the given aliases. It fails with
// ErrAgentExists, registering nothing, if any of those names is taken.
func (r *Registry) Register(a Adapter, aliases ...string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	id := a.ID()
	if id == "" {
		return fmt.Errorf("register: adapter id is empty")
	}
	for _, n := range append([]string{id}, aliases...) {
		if r.takenLocked(n) {
			return fmt.Errorf("register %s: %w: %q", id, ErrAgentExists, n)
		}
	}
	r.adapters[id] = a
	for _, al := range aliases {
		r.aliases[al] = id
	}
	return nil
}

func (r *Registry) takenLocked(name string) bool {
	_, a := r.adapters[name]
	_, b := r.aliases[name]
	return a || b
}

// Get returns the adapter registered under id or alias.
func (r *Registry) Get(name string) (Adapter, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if id, ok := r.aliases[name]; ok {
		name = id
	}
	a, ok := r.adapters[name]
	return a, ok
}

// List returns the registered ids (not aliases), sorted.
func (r *Registry) List() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	ids := make([]string, 0, len(r.adapters))
	for id := range r.adapters {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Unregister removes the adapter with that id and its aliases, and reports
// whether one was removed.
func (r *Registry) Unregister(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.adapters[id]; !ok {
		return false
	}
	delete(r.adapters, id)
	for al, target := range r.aliases {
		if target == id {
			delete(r.aliases, al)
		}
	}
	return true
}
