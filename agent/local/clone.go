package local

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// Deep copies. The state copies what callers pass in (so they may reuse
// it) and what it hands out (so they may modify it without racing the
// syncer, which reads the stored objects without copying them again).

func copyStrings(s []string) []string {
	if s == nil {
		return nil
	}
	out := make([]string, len(s))
	copy(out, s)
	return out
}

func copyStringMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func copyHeader(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = copyStrings(v)
	}
	return out
}

// copyOpaque deep-copies decoded JSON-like values (opaque proxy config).
func copyOpaque(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return copyOpaqueMap(t)
	case []any:
		if t == nil {
			return t
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyOpaque(e)
		}
		return out
	case []string:
		return copyStrings(t)
	case map[string]string:
		return copyStringMap(t)
	default:
		return v
	}
}

func copyOpaqueMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = copyOpaque(v)
	}
	return out
}

func cloneProxy(p structs.ConnectProxyConfig) structs.ConnectProxyConfig {
	c := p
	c.Config = copyOpaqueMap(p.Config)
	if p.Upstreams != nil {
		c.Upstreams = make([]structs.Upstream, len(p.Upstreams))
		for i, u := range p.Upstreams {
			u.Config = copyOpaqueMap(u.Config)
			c.Upstreams[i] = u
		}
	}
	if p.Expose.Paths != nil {
		c.Expose.Paths = make([]structs.ExposePath, len(p.Expose.Paths))
		copy(c.Expose.Paths, p.Expose.Paths)
	}
	return c
}

func cloneService(s *structs.NodeService) *structs.NodeService {
	if s == nil {
		return nil
	}
	c := *s
	c.Tags = copyStrings(s.Tags)
	if s.TaggedAddresses != nil {
		c.TaggedAddresses = make(map[string]structs.ServiceAddress, len(s.TaggedAddresses))
		for k, v := range s.TaggedAddresses {
			c.TaggedAddresses[k] = v
		}
	}
	c.Meta = copyStringMap(s.Meta)
	if s.Weights != nil {
		w := *s.Weights
		c.Weights = &w
	}
	c.Proxy = cloneProxy(s.Proxy)
	return &c
}

func cloneCheck(h *structs.HealthCheck) *structs.HealthCheck {
	if h == nil {
		return nil
	}
	c := *h
	c.ServiceTags = copyStrings(h.ServiceTags)
	c.Definition.Header = copyHeader(h.Definition.Header)
	return &c
}

func cloneCheckType(t *structs.CheckType) *structs.CheckType {
	if t == nil {
		return nil
	}
	c := *t
	c.ScriptArgs = copyStrings(t.ScriptArgs)
	c.Header = copyHeader(t.Header)
	return &c
}

func cloneDefinition(d *structs.ServiceDefinition) *structs.ServiceDefinition {
	if d == nil {
		return nil
	}
	c := *d
	c.Tags = copyStrings(d.Tags)
	c.Meta = copyStringMap(d.Meta)
	if d.TaggedAddresses != nil {
		c.TaggedAddresses = make(map[string]structs.ServiceAddress, len(d.TaggedAddresses))
		for k, v := range d.TaggedAddresses {
			c.TaggedAddresses[k] = v
		}
	}
	if d.Weights != nil {
		w := *d.Weights
		c.Weights = &w
	}
	c.Check = cloneCheckType(d.Check)
	if d.Checks != nil {
		c.Checks = make(structs.CheckTypes, len(d.Checks))
		for i, ct := range d.Checks {
			c.Checks[i] = cloneCheckType(ct)
		}
	}
	if d.Proxy != nil {
		p := cloneProxy(*d.Proxy)
		c.Proxy = &p
	}
	if d.Connect != nil {
		conn := *d.Connect
		conn.SidecarService = cloneDefinition(d.Connect.SidecarService)
		c.Connect = &conn
	}
	return &c
}

// normalService is the part of a service the catalog keeps, with nil and
// empty lists and maps made equal: codecs and JSON clients turn one into
// the other, and the anti-entropy comparison must not see that as drift.
func normalService(s *structs.NodeService) *structs.NodeService {
	c := cloneService(s)
	c.RaftIndex = structs.RaftIndex{}
	c.LocallyRegisteredAsSidecar = false
	if len(c.Tags) == 0 {
		c.Tags = nil
	}
	if len(c.TaggedAddresses) == 0 {
		c.TaggedAddresses = nil
	}
	if len(c.Meta) == 0 {
		c.Meta = nil
	}
	if len(c.Proxy.Config) == 0 {
		c.Proxy.Config = nil
	}
	if len(c.Proxy.Upstreams) == 0 {
		c.Proxy.Upstreams = nil
	}
	for i := range c.Proxy.Upstreams {
		if len(c.Proxy.Upstreams[i].Config) == 0 {
			c.Proxy.Upstreams[i].Config = nil
		}
	}
	if len(c.Proxy.Expose.Paths) == 0 {
		c.Proxy.Expose.Paths = nil
	}
	return c
}

// sameService reports whether the catalog's copy matches ours. It compares
// JSON encodings of the normalised records: opaque proxy config crosses the
// msgpack RPC codec and may come back with other number types (int vs
// int64 vs float64) that JSON renders alike.
func sameService(local, remote *structs.NodeService) bool {
	if local == nil || remote == nil {
		return local == remote
	}
	a, errA := json.Marshal(normalService(local))
	b, errB := json.Marshal(normalService(remote))
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

func normalCheck(h *structs.HealthCheck) *structs.HealthCheck {
	c := cloneCheck(h)
	c.RaftIndex = structs.RaftIndex{}
	c.Node = strings.ToLower(c.Node)
	if len(c.ServiceTags) == 0 {
		c.ServiceTags = nil
	}
	if len(c.Definition.Header) == 0 {
		c.Definition.Header = nil
	}
	return c
}

// sameCheck reports whether the catalog's copy of a check matches ours;
// ignoreOutput leaves Output out (an output change is being deferred).
func sameCheck(local, remote *structs.HealthCheck, ignoreOutput bool) bool {
	if local == nil || remote == nil {
		return local == remote
	}
	a, b := normalCheck(local), normalCheck(remote)
	if ignoreOutput {
		a.Output, b.Output = "", ""
	}
	return reflect.DeepEqual(a, b)
}

// stringMapsEqual treats nil and empty as equal.
func stringMapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// HashService is the content hash of a service that blocking
// GET /v1/agent/service/<id> uses as its index (X-Consul-ContentHash): 16
// hex digits, stable across processes, changing whenever anything the
// endpoint returns changes. Consul hashes the service struct too; clients
// treat the value as opaque.
func HashService(s *structs.NodeService) string {
	if s == nil {
		return ""
	}
	c := cloneService(s)
	c.RaftIndex = structs.RaftIndex{}
	b, err := json.Marshal(c)
	if err != nil {
		// Only unencodable opaque config gets here; fall back to the
		// identity so the hash still changes with the record's identity.
		b = []byte(c.ID + "\x00" + c.Service)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
