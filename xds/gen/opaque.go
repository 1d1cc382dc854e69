package gen

import (
	"time"

	"github.com/trellis-mesh/trellis/structs"
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

// opaqueMillis returns a positive millisecond setting as a duration.
func opaqueMillis(m map[string]any, key string) time.Duration {
	if ms, ok := structs.OpaqueInt(m, key); ok && ms > 0 {
		return time.Duration(ms) * time.Millisecond
	}
	return 0
}
