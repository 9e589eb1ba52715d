package drover

import _ "embed"

//go:embed schema/ues.schema.json
var schemaJSON []byte

// JSONSchema returns the JSON Schema (draft 2020-12) of the UES wire form
// (UES-4). The returned slice is a copy.
func JSONSchema() []byte { return append([]byte(nil), schemaJSON...) }
