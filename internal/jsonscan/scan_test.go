package jsonscan

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// v1 is how adapters decode (runner.Unmarshal): jsonv2 with encoding/json's
// semantics.
var v1 = jsonv1.DefaultOptionsV1()

var valid = []string{
	`{}`, ` { } `, `[]`, `[ ]`, `""`, `"a\"b\\c\/d\b\f\n\r\t\u00e9\ud83d\ude00"`, `0`, `-0`, `-0.5e-3`, `12E+2`, `1.25`,
	`true`, `false`, `null`, `{"a":1,"b":[1,2,{"c":null}],"d":{"e":"f"}}`, "\t\r\n[1 , 2]\n",
	`{"a":1,"a":2}`, `"h\u00e9llo wörld ✓"`, `{"":""}`, `[[[[[]]]]]`, `"\u0000"`,
	"\"\xff\"", // invalid UTF-8 is accepted by encoding/json (and replaced when decoded)
	`{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"hi"}}}}`,
}

var invalid = []string{
	``, ` `, `{`, `}`, `[`, `]`, `{,}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[,1]`, `{"a" 1}`, `{"a":1 "b":2}`,
	`01`, `-`, `1.`, `.5`, `1e`, `1e+`, `+1`, `0x1`, `tru`, `nul`, `nullx`, `truefalse`, `"a`, `"\x"`, `"\u12"`,
	`"\u12g4"`, "\"a\tb\"", "\"\x01\"", `{"a":1}}`, `[1]]`, `1 2`, `{1:2}`, `{"a":1}x`, `[` + strings.Repeat("[", 1200) + `]`,
}

func accepts(b []byte) bool {
	s := New(b)
	return s.Skip() && s.End()
}

func TestPERF2_ScannerValidity(t *testing.T) {
	for _, in := range valid {
		if !accepts([]byte(in)) {
			t.Errorf("rejected valid %q", in)
		}
	}
	for _, in := range invalid {
		if accepts([]byte(in)) {
			t.Errorf("accepted invalid %q", in)
		}
	}
}

// FuzzPERF2_ScannerAgreesWithDecoder: whatever the scanner accepts the
// adapters' decoder accepts, strings decode to the same text and raw
// values are the bytes a json.RawMessage gets.
func FuzzPERF2_ScannerAgreesWithDecoder(f *testing.F) {
	for _, in := range append(append([]string{}, valid...), invalid...) {
		f.Add([]byte(in))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v json.RawMessage // syntax alone: 1e700 is valid JSON, no float64
		decErr := jsonv2.Unmarshal(b, &v, v1)
		if accepts(b) && decErr != nil {
			t.Fatalf("scanner accepts %q, decoder: %v", b, decErr)
		}
		s := New(b)
		if str, ok := s.String(); ok && s.End() {
			var want string
			if err := jsonv2.Unmarshal(b, &want, v1); err != nil || want != str {
				t.Fatalf("String of %q = %q, decoder %q (%v)", b, str, want, err)
			}
		}
		s = New(b)
		if str, ok := s.StringOf("a", "text", "x\"y"); ok && s.End() {
			var want string
			if err := jsonv2.Unmarshal(b, &want, v1); err != nil || want != str {
				t.Fatalf("StringOf of %q = %q, decoder %q (%v)", b, str, want, err)
			}
		}
		s = New(b)
		if raw, ok := s.Raw(); ok && s.End() {
			var want json.RawMessage
			if err := jsonv2.Unmarshal(b, &want, v1); err != nil || string(want) != string(raw) {
				t.Fatalf("Raw of %q = %q, decoder %q (%v)", b, raw, want, err)
			}
		}
		// Inside an object, each member as the decoder sees it.
		s = New(b)
		got := map[string]json.RawMessage{}
		for k := range s.Members() {
			raw, ok := s.Raw()
			if !ok {
				break
			}
			got[string(k)] = raw
		}
		if !s.Failed() && s.End() {
			var want map[string]json.RawMessage
			if err := jsonv2.Unmarshal(b, &want, v1); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("members of %q = %q, decoder %q (%v)", b, got, want, err)
			}
		}
	})
}

func TestPERF2_ScannerStrings(t *testing.T) {
	for in, want := range map[string]string{`"plain"`: "plain", `"tab\tnew\nline"`: "tab\tnew\nline", `"\u00e9\u4e2d"`: "é中",
		`"\ud83d\ude00 face"`: "😀 face", `"h\u00e9llo wörld"`: "héllo wörld", `"\/\\\""`: `/\"`, `"\b\f\r"`: "\b\f\r"} {
		s := New([]byte(in))
		got, ok := s.String()
		if !ok || got != want {
			t.Errorf("String(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
	// What encoding/json would replace with U+FFFD is left to it.
	for _, in := range []string{`"\ud83d"`, `"\ude00"`, `"\ud83dx"`, `"\ud83d\u0041"`, "\"\xff\"", "\"\xe2\x82\""} {
		s := New([]byte(in))
		if got, ok := s.String(); ok {
			t.Errorf("String(%s) = %q, want not handled", in, got)
		}
	}
	s := New([]byte(`12`))
	if _, ok := s.String(); ok || !s.Failed() {
		t.Error("String of a number handled")
	}
	for in, want := range map[string]string{`"text"`: "text", `"te\u0078t"`: "text", `"other"`: "other"} {
		s := New([]byte(in))
		if got, ok := s.StringOf("image", "text"); !ok || got != want {
			t.Errorf("StringOf(%s) = %q, %v; want %q", in, got, ok, want)
		}
	}
}

type inner struct {
	Deep string `json:"deep_name"`
}

type fieldsSubject struct {
	inner
	Plain   string
	Tagged  string `json:"tagName,omitempty"`
	Skipped string `json:"-"`
	Dash    string `json:"-,"`
	hidden  string //nolint:unused // unexported: never decoded
	Ptr     *struct {
		X int `json:"x"`
	} `json:"ptr"`
}

func TestPERF2_FieldsClaims(t *testing.T) {
	f := FieldsOf(reflect.TypeFor[fieldsSubject]())
	for _, name := range []string{"deep_name", "DEEP_NAME", "deepname", "Plain", "plain", "PLAIN", "tagName", "tagname", "TAG-NAME", "-", "ptr", "Ptr",
		"plaın", "\u017fkipped", strings.Repeat("x", 65)} {
		if !f.Claims([]byte(name)) {
			t.Errorf("%q not claimed", name)
		}
	}
	for _, name := range []string{"Skipped", "skipped", "hidden", "x", "inner", "Tagged", "other"} {
		if f.Claims([]byte(name)) {
			t.Errorf("%q claimed", name)
		}
	}
}

type catchAll struct {
	Named string         `json:"named"`
	Rest  map[string]any `json:",unknown"`
}

// A struct that keeps unknown members claims every name.
func TestPERF2_FieldsClaimAllForUnknown(t *testing.T) {
	f := FieldsOf(reflect.TypeFor[catchAll]())
	if !f.Claims([]byte("anything")) {
		t.Error(`a struct with an ",unknown" field does not claim "anything"`)
	}
	var got catchAll
	if err := jsonv2.Unmarshal([]byte(`{"anything":1}`), &got, v1); err != nil || got.Rest["anything"] == nil {
		t.Fatalf("the decoder did not keep the member (%v): the test's premise", err)
	}
}

// FuzzPERF2_FieldsClaimWhatTheDecoderTakes: a member the decoder puts into
// a field is always claimed.
func FuzzPERF2_FieldsClaimWhatTheDecoderTakes(f *testing.F) {
	for _, s := range []string{"plain", "PLAIN", "deep_name", "DeepName", "tag-name", "\u212aelvin", "ptr", "-", "x"} {
		f.Add(s)
	}
	fields := FieldsOf(reflect.TypeFor[fieldsSubject]())
	f.Fuzz(func(t *testing.T, name string) {
		line, err := json.Marshal(map[string]string{name: "v"})
		if err != nil {
			return
		}
		var got fieldsSubject
		if jsonv2.Unmarshal(line, &got, v1) != nil {
			return
		}
		if got != (fieldsSubject{}) && !fields.Claims([]byte(name)) {
			t.Fatalf("%q decoded into %+v but not claimed", name, got)
		}
	})
}
