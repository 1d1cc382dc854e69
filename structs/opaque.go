package structs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Accessors for the opaque proxy and upstream Config maps, whose values
// arrive with whatever types JSON or msgpack decoding gave them (an int may
// be int64, uint64, float64 or json.Number).

// OpaqueValue returns m's value for key, matched case-insensitively as
// Consul's weak decoding does.
func OpaqueValue(m map[string]any, key string) (any, bool) {
	if v, ok := m[key]; ok {
		return v, true
	}
	for k, v := range m {
		if strings.EqualFold(k, key) {
			return v, true
		}
	}
	return nil, false
}

// OpaqueString returns a scalar as a string ("" when absent).
func OpaqueString(m map[string]any, key string) string {
	v, ok := OpaqueValue(m, key)
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// OpaqueInt returns a number (any numeric type or a numeric string).
func OpaqueInt(m map[string]any, key string) (int64, bool) {
	v, ok := OpaqueValue(m, key)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case int64:
		return n, true
	case uint:
		return int64(n), true //nolint:gosec // config numbers (ports, counts, durations) are far below MaxInt64
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true //nolint:gosec // config numbers (ports, counts, durations) are far below MaxInt64
	case float32:
		return int64(n), true
	case float64:
		return int64(n), true
	case json.Number:
		if i, err := n.Int64(); err == nil {
			return i, true
		}
		f, err := n.Float64()
		return int64(f), err == nil
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return i, err == nil
	}
	return 0, false
}
