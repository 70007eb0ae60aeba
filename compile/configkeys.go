package compile

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/manifoldflow/manifold/internal/suggest"
)

// decodeConfig decodes the manifold.toml text read from path into c. Every key
// is checked against Config's toml tags first: an unknown key is an error
// naming the key most likely meant, and a value of the wrong type one naming
// its line, its key and the type it needs, in the config's words (the TOML
// library's would speak of Go types, or leave a string given for a table
// unread).
func decodeConfig(path, text string, c *Config) error {
	var raw map[string]any
	md, err := toml.Decode(text, &raw)
	if err != nil {
		return tomlError(path, err)
	}
	configType := reflect.TypeFor[Config]()
	var unknown []toml.Key
	var bad error
	var skip []toml.Key // keys under which nothing more is checked
	for _, key := range md.Keys() {
		if slices.ContainsFunc(skip, func(p toml.Key) bool { return under(key, p) || slices.Equal(key, p) }) {
			continue
		}
		t, ok := keyType(configType, key)
		if !ok {
			// The shortest unknown key it is under: a dotted key names its
			// tables only in itself.
			for i := 1; i <= len(key); i++ {
				if _, ok := keyType(configType, key[:i]); !ok {
					key = key[:i]
					break
				}
			}
			unknown = append(unknown, key)
			skip = append(skip, key)
			continue
		}
		want, ok := fits(t, md.Type(key...), value(raw, key))
		if ok {
			continue
		}
		skip = append(skip, key)
		if bad != nil {
			continue
		}
		if want == listOfTables {
			want += " ([[" + key.String() + "]])"
		}
		at := path
		if line := keyLine(text, key); line > 0 {
			at += ":" + strconv.Itoa(line)
		}
		bad = fmt.Errorf("%s: key %s: want %s, got %s", at, key, want, tomlTypeName(md.Type(key...)))
	}
	if len(unknown) > 0 {
		return unknownKeys(path, configType, unknown)
	}
	if bad != nil {
		return bad
	}
	if _, err := toml.Decode(text, c); err != nil {
		return tomlError(path, err)
	}
	return nil
}

// tomlError is an error of the TOML library, with the file and line it is at.
func tomlError(path string, err error) error {
	var pe toml.ParseError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", path, err)
	}
	msg := pe.Message
	if pe.Usage != "" {
		msg += ": " + strings.TrimSpace(pe.Usage)
	}
	return fmt.Errorf("%s:%d: %s", path, pe.Position.Line, msg)
}

// unknownKeys says which keys are unknown, each with the key most likely meant
// where one is near, and which keys there are.
func unknownKeys(path string, configType reflect.Type, keys []toml.Key) error {
	parent := keys[0][:len(keys[0])-1]
	var names []string
	for _, k := range keys {
		name := k.String()
		up := k[:len(k)-1]
		if t, ok := keyType(configType, up); ok {
			if c, ok := suggest.Closest(k[len(k)-1], keyNames(t)); ok {
				name += " (did you mean " + append(slices.Clone(up), c).String() + "?)"
			}
		}
		names = append(names, name)
		if !slices.Equal(up, parent) {
			parent = nil
		}
	}
	word := "key"
	if len(keys) > 1 {
		word = "keys"
	}
	of := ""
	t, _ := keyType(configType, parent)
	if len(parent) > 0 {
		of = " of " + parent.String()
	}
	list := "none"
	if known := keyNames(t); len(known) > 0 {
		list = strings.Join(known[:len(known)-1], ", ") + " and " + known[len(known)-1]
	}
	return fmt.Errorf("%s: unknown %s %s; known keys%s are %s", path, word, strings.Join(names, ", "), of, list)
}

// keyType returns the Go type that key of a manifold.toml decodes into, and
// whether Config has the key.
func keyType(t reflect.Type, key toml.Key) (reflect.Type, bool) {
	for _, piece := range key {
		t = table(t)
		switch t.Kind() {
		case reflect.Struct:
			f, ok := tomlField(t, piece)
			if !ok {
				return nil, false
			}
			t = f.Type
		case reflect.Map:
			t = t.Elem()
		default:
			return nil, false
		}
	}
	return t, true
}

// table returns the type whose keys a value of type t has: t itself, what it
// points to, or a list of tables' element.
func table(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct {
		t = t.Elem()
	}
	return t
}

func tomlField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("toml"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// keyNames returns the keys a table of type t has, in Config's order.
func keyNames(t reflect.Type) []string {
	var names []string
	if t == nil {
		return nil
	}
	if t = table(t); t.Kind() != reflect.Struct {
		return nil
	}
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("toml"), ","); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return names
}

// fits reports whether a TOML value of tomlType (MetaData.Type's name) and
// value v decodes into Go type t, and says what t wants.
func fits(t reflect.Type, tomlType string, v any) (string, bool) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.String:
		return "a string", tomlType == "String"
	case reflect.Bool:
		return "true or false", tomlType == "Bool"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number", tomlType == "Integer"
	case reflect.Map:
		return "a table of strings", tomlType == "Hash"
	case reflect.Struct:
		return "a table", tomlType == "Hash"
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Struct {
			return listOfTables, tomlType == "ArrayHash" || tomlType == "Array" && allOf[map[string]any](v)
		}
		return "a list of strings", tomlType == "Array" && allOf[string](v)
	}
	return t.String(), false
}

const listOfTables = "a list of tables"

// allOf reports whether v is a list of Ts only.
func allOf[T any](v any) bool {
	list, ok := v.([]any)
	if !ok {
		_, ok := v.([]map[string]any)
		return ok
	}
	for _, e := range list {
		if _, ok := e.(T); !ok {
			return false
		}
	}
	return true
}

// tomlTypeName says a TOML type, MetaData.Type's name, in words.
func tomlTypeName(t string) string {
	switch t {
	case "String":
		return "a string"
	case "Integer":
		return "an integer"
	case "Float":
		return "a decimal number"
	case "Bool":
		return "a boolean"
	case "Array":
		return "a list"
	case "Hash":
		return "a table"
	case "ArrayHash":
		return "a list of tables"
	case "Datetime", "DatetimeLocal", "DateLocal", "TimeLocal":
		return "a date or time"
	}
	return t
}

// value returns the decoded value at key of raw, nil where there is none (in a
// list of tables, say).
func value(raw map[string]any, key toml.Key) any {
	var v any = raw
	for _, piece := range key {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[piece]
	}
	return v
}

// under reports whether key is below p.
func under(key, p toml.Key) bool {
	return len(key) > len(p) && slices.Equal(key[:len(p)], p)
}

// keyLine returns the line of text (from 1) where key is defined: its table
// header, or its `key = value` line below the header of its table; 0 when it
// cannot tell (a key in an inline table, say).
func keyLine(text string, key toml.Key) int {
	var table toml.Key
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "["):
			name := strings.Trim(strings.TrimSpace(strings.SplitN(strings.TrimLeft(line, "["), "]", 2)[0]), " ")
			table = splitKey(name)
			if slices.Equal(table, key) {
				return i + 1
			}
		case strings.Contains(line, "=") && !strings.HasPrefix(line, "#"):
			lhs, _, _ := strings.Cut(line, "=")
			if slices.Equal(append(slices.Clone(table), splitKey(lhs)...), key) {
				return i + 1
			}
		}
	}
	return 0
}

// splitKey splits a bare, quoted or dotted TOML key into its pieces, their
// quotes taken off.
func splitKey(s string) toml.Key {
	var k toml.Key
	var piece strings.Builder
	var quote rune
	for _, r := range strings.TrimSpace(s) {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			piece.WriteRune(r)
		case r == '"' || r == '\'':
			quote = r
		case r == '.':
			k = append(k, strings.TrimSpace(piece.String()))
			piece.Reset()
		default:
			piece.WriteRune(r)
		}
	}
	return append(k, strings.TrimSpace(piece.String()))
}
