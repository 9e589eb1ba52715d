package jsonscan

import (
	"reflect"
	"strings"
)

// Fields is the set of member names encoding/json would decode into a
// struct type's fields, for a walk to know which members it must not
// skip.
type Fields struct {
	folded map[string]bool
	all    bool // a field takes unknown members (jsonv2's inline or unknown)
}

// FieldsOf returns the fields of struct type t as encoding/json sees them:
// exported fields by tag name or field name, those of embedded structs
// without a tag name promoted, fields tagged "-" left out. A struct with a
// field that takes members it does not name (jsonv2's `inline` or
// `unknown`) claims every name.
func FieldsOf(t reflect.Type) Fields {
	f := &Fields{folded: map[string]bool{}}
	f.add(t)
	return *f
}

func (f *Fields) add(t reflect.Type) {
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		for o := range strings.SplitSeq(opts, ",") {
			if o == "inline" || o == "unknown" {
				f.all = true
			}
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if sf.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			f.add(ft)
			continue
		}
		if !sf.IsExported() {
			continue
		}
		if name == "" {
			name = sf.Name
		}
		var buf [maxFolded]byte
		if k, ok := fold(buf[:0], name); ok {
			f.folded[string(k)] = true
		}
	}
}

// maxFolded is the longest name Claims compares; longer ones are claimed.
const maxFolded = 64

// Claims reports whether the general decoding might decode member name
// into one of the fields. It errs towards yes: names are compared
// case-insensitively with '_' and '-' dropped, and any name with a byte
// ≥ 0x80 (Unicode case folding: "ſ" matches "s") or longer than 64 bytes
// is claimed, as is every name when a field takes unknown members.
func (f Fields) Claims(name []byte) bool {
	var buf [maxFolded]byte
	k, ok := fold(buf[:0], name)
	return f.all || !ok || f.folded[string(k)]
}

// fold appends name lowercased, without '_' and '-', to dst; ok is false
// for a name with a byte ≥ 0x80 or too long.
func fold[S string | []byte](dst []byte, name S) (_ []byte, ok bool) {
	if len(name) > maxFolded {
		return dst, false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 0x80:
			return dst, false
		case c == '_' || c == '-':
		case 'A' <= c && c <= 'Z':
			dst = append(dst, c+'a'-'A')
		default:
			dst = append(dst, c)
		}
	}
	return dst, true
}
