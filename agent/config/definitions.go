package config

import (
	"bytes"
	"encoding/json"
	"reflect"
)

// Definition is one service or check definition from a config source, as
// a JSON object with the keys as written (Consul's snake_case, or
// CamelCase). The agent decodes it as it decodes the same definition sent
// to its HTTP API, so that both accept exactly the same keys.
type Definition struct {
	// Source names where the definition was read: a file's path or an
	// -hcl fragment.
	Source string
	// JSON is the definition's object.
	JSON []byte
}

// definitions is the value of a service, services, check or checks key:
// one object or a list of objects (Consul takes either, and an HCL file
// repeating `service { }` gives a list).
type definitions []Definition

// UnmarshalJSON keeps each definition's object as it is.
func (d *definitions) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	switch {
	case bytes.Equal(data, []byte("null")):
		return nil
	case len(data) > 0 && data[0] == '{':
		*d = append(*d, Definition{JSON: bytes.Clone(data)})
		return nil
	case len(data) > 0 && data[0] == '[':
		var list []json.RawMessage
		if err := json.Unmarshal(data, &list); err != nil {
			return err
		}
		for _, e := range list {
			e = bytes.TrimSpace(e)
			if len(e) == 0 || e[0] != '{' {
				return definitionTypeError(e)
			}
			*d = append(*d, Definition{JSON: bytes.Clone(e)})
		}
		return nil
	}
	return definitionTypeError(data)
}

// definitionTypeError is a type error encoding/json completes with the
// key's path.
func definitionTypeError(data []byte) error {
	kind := "a scalar"
	switch {
	case len(data) > 0 && data[0] == '"':
		kind = "string"
	case len(data) > 0 && data[0] == '[':
		kind = "array"
	case bytes.Equal(data, []byte("true")), bytes.Equal(data, []byte("false")):
		kind = "bool"
	case len(data) > 0:
		kind = "number"
	}
	return &json.UnmarshalTypeError{Value: kind, Type: reflect.TypeFor[definitions]()}
}

// tagDefinitions records where the source's definitions come from.
func (s *source) tagDefinitions(name string) {
	for _, list := range []definitions{s.Service, s.Services, s.Check, s.Checks} {
		for i := range list {
			list[i].Source = name
		}
	}
}
