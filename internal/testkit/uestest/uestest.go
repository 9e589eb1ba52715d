// Package uestest holds test helpers shared by drover's packages: validation
// of encoded events against the shipped UES JSON Schema, and the harness
// every adapter's translator is tested on (Replayer for golden files and
// semantic tables over captured native streams, ConversationReplay for the
// captures of live runs, Fuzz for the decoder).
package uestest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/drover-run/drover"
	"github.com/google/go-cmp/cmp"
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

// CheckGolden compares evs, encoded one JSON object per line, with the
// golden file (rewriting it first when update is set), and validates every
// golden line against the UES schema (UES-4). It reports through t.
func CheckGolden(t testing.TB, golden string, evs []drover.Event, update bool) {
	t.Helper()
	var got bytes.Buffer
	for _, ev := range evs {
		data, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		got.Write(data)
		got.WriteByte('\n')
	}
	if update {
		if err := os.WriteFile(golden, got.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got.String()); diff != "" {
		t.Errorf("%s: UES mismatch (-golden +got):\n%s", golden, diff)
	}
	for _, l := range bytes.Split(bytes.TrimSpace(want), []byte("\n")) {
		if len(l) == 0 {
			continue
		}
		if err := ValidateJSON(l); err != nil {
			t.Errorf("%s: golden event fails the UES schema: %s: %v", golden, l, err)
		}
	}
}
