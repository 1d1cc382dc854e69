package gen

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Keys of a proxy registration's opaque Config that generation honours
// (Consul's names).
const (
	cfgProtocol            = "protocol"
	cfgBindAddress         = "bind_address"
	cfgBindPort            = "bind_port"
	cfgLocalConnectTimeout = "local_connect_timeout_ms"
	cfgLocalRequestTimeout = "local_request_timeout_ms"
)

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

// opaqueString returns a scalar as a string ("" when absent).
func opaqueString(m map[string]any, key string) string {
	v, ok := opaqueValue(m, key)
	if !ok || v == nil {
		return ""
	}
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(v)
}

// opaqueInt returns a number (any numeric type or a numeric string).
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

// opaqueMillis returns a positive millisecond setting as a duration.
func opaqueMillis(m map[string]any, key string) time.Duration {
	if ms, ok := opaqueInt(m, key); ok && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 0
}
