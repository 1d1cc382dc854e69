package structs

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Decoding config entries from JSON the way Consul's HTTP API does: the
// Kind (or kind) key picks the type, field names match in any case or by
// their snake_case alias (path_exact for PathExact, as HCL-minded users and
// `consul config write` files spell them), durations may be strings or
// nanoseconds, scalars are weakly typed ("5" for a number), and a key that
// matches no field is an error naming it (Consul answers those with 400).

// Errors of DecodeConfigEntry, with Consul's texts.
var (
	ErrConfigEntryNoKind     = errors.New("Payload does not contain a kind/Kind key at the top level")
	ErrConfigEntryKindString = errors.New("Kind value in payload is not a string")
)

var (
	durationType    = reflect.TypeOf(time.Duration(0))
	timeType        = reflect.TypeOf(time.Time{})
	unmarshalerType = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()
	raftIndexType   = reflect.TypeOf(RaftIndex{})
)

// DecodeConfigEntryJSON decodes one config entry of any kind from a JSON
// object.
func DecodeConfigEntryJSON(body []byte) (ConfigEntry, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var raw map[string]interface{}
	if err := dec.Decode(&raw); err != nil {
		return nil, err
	}
	return DecodeConfigEntry(raw)
}

// DecodeConfigEntry decodes one config entry from a generic JSON map (as
// encoding/json produces it).
func DecodeConfigEntry(raw map[string]interface{}) (ConfigEntry, error) {
	kindVal, ok := raw["Kind"]
	if !ok {
		kindVal, ok = raw["kind"]
	}
	if !ok {
		return nil, ErrConfigEntryNoKind
	}
	kind, ok := kindVal.(string)
	if !ok {
		return nil, ErrConfigEntryKindString
	}
	entry, err := MakeConfigEntry(kind, "")
	if err != nil {
		return nil, err
	}
	top := make(map[string]interface{}, len(raw))
	for k, v := range raw {
		if k != "Kind" && k != "kind" {
			top[k] = v
		}
	}
	tr := &translator{}
	translated := tr.value(top, reflect.TypeOf(entry).Elem(), "")
	if len(tr.unused) > 0 {
		sort.Strings(tr.unused)
		errs := make([]error, 0, len(tr.unused))
		for _, k := range tr.unused {
			if strings.HasSuffix(strings.ToLower(k), "namespace") {
				errs = append(errs, fmt.Errorf("invalid config key %q, namespaces are a consul enterprise feature", k))
				continue
			}
			errs = append(errs, fmt.Errorf("invalid config key %q", k))
		}
		return nil, multiError(errs)
	}
	buf, err := json.Marshal(translated)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(buf, entry); err != nil {
		return nil, err
	}
	return entry, nil
}

// translator rewrites a decoded JSON value so that encoding/json can decode
// it strictly into a Go type: object keys become the Go field names, and
// weakly typed scalars become the types the fields expect. Keys that match
// no field are collected in unused, by path.
type translator struct {
	unused []string
}

func (tr *translator) value(v interface{}, t reflect.Type, path string) interface{} {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if v == nil {
		return nil
	}
	switch {
	case t == durationType:
		return weakDuration(v)
	case t == timeType, reflect.PointerTo(t).Implements(unmarshalerType):
		return v
	}
	// HCL-sourced maps arrive as one-element lists of objects.
	if l, ok := v.([]interface{}); ok && len(l) == 1 && (t.Kind() == reflect.Struct || t.Kind() == reflect.Map) {
		v = l[0]
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]interface{})
		if !ok {
			return v
		}
		return tr.object(m, t, path)
	case reflect.Slice, reflect.Array:
		l, ok := v.([]interface{})
		if !ok {
			return v
		}
		out := make([]interface{}, len(l))
		for i, e := range l {
			out[i] = tr.value(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
		return out
	case reflect.Map:
		m, ok := v.(map[string]interface{})
		if !ok || t.Elem().Kind() == reflect.Interface {
			return v
		}
		out := make(map[string]interface{}, len(m))
		for k, e := range m {
			out[k] = tr.value(e, t.Elem(), fmt.Sprintf("%s[%s]", path, k))
		}
		return out
	case reflect.Interface:
		return v
	default:
		return weakScalar(v, t.Kind())
	}
}

// object translates the keys of a JSON object for struct type t.
func (tr *translator) object(m map[string]interface{}, t reflect.Type, path string) map[string]interface{} {
	fields := structFields(t)
	out := make(map[string]interface{}, len(m))
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, ok := fields.lookup(k)
		if !ok {
			name := k
			if path != "" {
				name = path + "." + k
			}
			tr.unused = append(tr.unused, name)
			continue
		}
		sub := f.Name
		if path != "" {
			sub = path + "." + f.Name
		}
		out[f.Name] = tr.value(m[k], f.Type, sub)
	}
	return out
}

// fieldSet indexes the JSON-visible fields of a struct type, embedded
// structs (RaftIndex) flattened.
type fieldSet struct {
	byName  map[string]reflect.StructField // lowercased field name
	byAlias map[string]reflect.StructField // alias tag
}

func structFields(t reflect.Type) fieldSet {
	fs := fieldSet{byName: map[string]reflect.StructField{}, byAlias: map[string]reflect.StructField{}}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			if f.Anonymous && f.Type.Kind() == reflect.Struct {
				walk(f.Type)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name == "-" {
				continue
			}
			fs.byName[strings.ToLower(f.Name)] = f
			if a := f.Tag.Get("alias"); a != "" {
				fs.byAlias[a] = f
			}
		}
	}
	walk(t)
	return fs
}

func (fs fieldSet) lookup(key string) (reflect.StructField, bool) {
	if f, ok := fs.byName[strings.ToLower(key)]; ok {
		return f, true
	}
	if f, ok := fs.byAlias[key]; ok {
		return f, true
	}
	f, ok := fs.byAlias[strings.ToLower(key)]
	return f, ok
}

// weakDuration turns a duration string ("10s") into nanoseconds for a
// time.Duration field; anything else is left for the JSON decoder to judge.
func weakDuration(v interface{}) interface{} {
	if s, ok := v.(string); ok {
		if s == "" {
			return 0
		}
		if d, err := time.ParseDuration(s); err == nil {
			return int64(d)
		}
	}
	return v
}

// weakScalar converts between strings, numbers and booleans the way
// mapstructure's weak typing does, when the conversion is lossless.
func weakScalar(v interface{}, k reflect.Kind) interface{} {
	switch k {
	case reflect.Bool:
		switch x := v.(type) {
		case string:
			if b, err := strconv.ParseBool(x); err == nil {
				return b
			}
			if x == "" {
				return false
			}
		case json.Number:
			if f, err := x.Float64(); err == nil {
				return f != 0
			}
		case float64:
			return x != 0
		}
	case reflect.String:
		switch x := v.(type) {
		case json.Number:
			return x.String()
		case float64:
			return strconv.FormatFloat(x, 'f', -1, 64)
		case bool:
			if x {
				return "1"
			}
			return "0"
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		switch x := v.(type) {
		case string:
			if x == "" {
				return 0
			}
			if _, err := strconv.ParseFloat(x, 64); err == nil {
				return json.Number(x)
			}
		case bool:
			if x {
				return 1
			}
			return 0
		}
	}
	return v
}
