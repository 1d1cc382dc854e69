package state

import (
	"reflect"

	"github.com/trellis-mesh/trellis/structs"
)

// Deep copies. The store copies every object on the way in (so that callers
// may reuse what they passed) and on the way out (so that callers may modify
// what they get without racing other readers of the shared memdb objects).
// Every copy keeps nil and empty apart, so that a value survives a
// snapshot/restore round trip unchanged.

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

func copyBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	out := make([]byte, len(b))
	copy(out, b)
	return out
}

// copyOpaque deep-copies decoded JSON-like values (opaque proxy config).
func copyOpaque(v interface{}) interface{} {
	switch t := v.(type) {
	case map[string]interface{}:
		return copyOpaqueMap(t)
	case []interface{}:
		if t == nil {
			return t
		}
		out := make([]interface{}, len(t))
		for i, e := range t {
			out[i] = copyOpaque(e)
		}
		return out
	case []string:
		return copyStrings(t)
	case map[string]string:
		return copyStringMap(t)
	case []byte:
		return copyBytes(t)
	default:
		return v
	}
}

func copyOpaqueMap(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return nil
	}
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = copyOpaque(v)
	}
	return out
}

func cloneNode(n *structs.Node) *structs.Node {
	if n == nil {
		return nil
	}
	c := *n
	c.TaggedAddresses = copyStringMap(n.TaggedAddresses)
	c.Meta = copyStringMap(n.Meta)
	return &c
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
	if h.Definition.Header != nil {
		c.Definition.Header = make(map[string][]string, len(h.Definition.Header))
		for k, v := range h.Definition.Header {
			c.Definition.Header[k] = copyStrings(v)
		}
	}
	return &c
}

func cloneChecks(in []*structs.HealthCheck) structs.HealthChecks {
	out := make(structs.HealthChecks, 0, len(in))
	for _, h := range in {
		out = append(out, cloneCheck(h))
	}
	return out
}

func cloneSession(s *structs.Session) *structs.Session {
	if s == nil {
		return nil
	}
	c := *s
	c.NodeChecks = copyStrings(s.NodeChecks)
	if s.ServiceChecks != nil {
		c.ServiceChecks = make([]structs.ServiceCheck, len(s.ServiceChecks))
		copy(c.ServiceChecks, s.ServiceChecks)
	}
	return &c
}

func cloneDirEntry(e *structs.DirEntry) *structs.DirEntry {
	if e == nil {
		return nil
	}
	c := *e
	c.Value = copyBytes(e.Value)
	return &c
}

// sameService and sameCheck decide whether a write would change a stored
// object. Nil and empty lists and maps count as equal: codecs and JSON
// clients turn one into the other, and a registration that only differs so
// must not move an index (anti-entropy re-sends every registration).
func sameService(a, b *structs.NodeService) bool {
	return reflect.DeepEqual(normalService(a), normalService(b))
}

func normalService(s *structs.NodeService) *structs.NodeService {
	c := cloneService(s)
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

func sameCheck(a, b *structs.HealthCheck) bool {
	return reflect.DeepEqual(normalCheck(a), normalCheck(b))
}

func normalCheck(h *structs.HealthCheck) *structs.HealthCheck {
	c := cloneCheck(h)
	if len(c.ServiceTags) == 0 {
		c.ServiceTags = nil
	}
	if len(c.Definition.Header) == 0 {
		c.Definition.Header = nil
	}
	return c
}
