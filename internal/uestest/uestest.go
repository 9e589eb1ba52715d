// Package uestest holds test helpers shared by drover's packages: validation
// of encoded events against the shipped UES JSON Schema.
package uestest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/drover-run/drover"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

var (
	once   sync.Once
	schema *jsonschema.Schema
	errS   error
)

func compiled() (*jsonschema.Schema, error) {
	once.Do(func() {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(drover.JSONSchema()))
		if err != nil {
			errS = err
			return
		}
		c := jsonschema.NewCompiler()
		if err = c.AddResource("ues.schema.json", doc); err != nil {
			errS = err
			return
		}
		schema, errS = c.Compile("ues.schema.json")
	})
	return schema, errS
}

// ValidateJSON checks one encoded event against the UES JSON Schema.
func ValidateJSON(data []byte) error {
	s, err := compiled()
	if err != nil {
		return fmt.Errorf("compile UES schema: %w", err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	return s.Validate(v)
}

// ValidateEvent encodes ev and checks it against the schema and IsAgentEvent.
func ValidateEvent(ev drover.Event) error {
	data, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if err := ValidateJSON(data); err != nil {
		return fmt.Errorf("%s: %w", data, err)
	}
	if err := drover.ValidateEvent(ev); err != nil {
		return fmt.Errorf("%s: %w", data, err)
	}
	return nil
}

// OneDoneLast checks the shape every run's stream must have: exactly one
// "done", and it is the last event. It returns that done's payload.
func OneDoneLast(evs []drover.Event) (drover.DonePayload, error) {
	n := 0
	for i, ev := range evs {
		if ev.Type != drover.TypeDone {
			continue
		}
		n++
		if i != len(evs)-1 {
			return drover.DonePayload{}, fmt.Errorf("done at %d of %d events: something followed it", i, len(evs))
		}
	}
	if n != 1 {
		return drover.DonePayload{}, fmt.Errorf("%d done events, want exactly 1", n)
	}
	d, ok := evs[len(evs)-1].Done()
	if !ok {
		return d, fmt.Errorf("done event without a DonePayload")
	}
	return d, nil
}
