package proxycfg

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// Helpers for the opaque proxy and upstream Config maps, whose values
// arrive with whatever types JSON or msgpack decoding gave them.

// opaqueValue returns m's value for key, matched case-insensitively as
// Consul's weak decoding does.
func opaqueValue(m map[string]any, key string) (any, bool) {
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

// opaqueString returns a scalar value as a lowercased string ("" when
// absent).
func opaqueString(m map[string]any, key string) string {
	v, ok := opaqueValue(m, key)
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return strings.ToLower(s)
	}
	return strings.ToLower(fmt.Sprint(v))
}

// opaqueInt returns a numeric value (any number type, or a numeric
// string).
func opaqueInt(m map[string]any, key string) (int64, bool) {
	v, ok := opaqueValue(m, key)
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
		return int64(n), true
	case uint32:
		return int64(n), true
	case uint64:
		return int64(n), true
	case float32:
		return int64(n), true
	case float64:
		return int64(n), true
	case json.Number:
		i, err := n.Int64()
		if err != nil {
			f, ferr := n.Float64()
			return int64(f), ferr == nil
		}
		return i, true
	case string:
		i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64)
		return i, err == nil
	}
	return 0, false
}

// firstNonEmpty returns the first non-empty string.
func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
