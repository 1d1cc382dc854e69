package structs

import (
	"bytes"
	"maps"
	"slices"
)

// Deep copies of the catalog types. The state store copies every object on
// the way in and out, the agent's local state and the proxy config manager
// copy what they keep: all of them use these, so a field added to a type
// is copied everywhere once it is copied here. Every copy keeps nil and
// empty apart, so that a value survives a snapshot/restore round trip
// unchanged.

// Clone returns a deep copy of the node (nil for nil).
func (n *Node) Clone() *Node {
	if n == nil {
		return nil
	}
	c := *n
	c.TaggedAddresses = maps.Clone(n.TaggedAddresses)
	c.Meta = maps.Clone(n.Meta)
	c.Locality = n.Locality.Clone()
	return &c
}

// Clone returns a deep copy of the proxy configuration, opaque config
// included.
func (p ConnectProxyConfig) Clone() ConnectProxyConfig {
	c := p
	c.Config = CloneOpaqueMap(p.Config)
	if p.Upstreams != nil {
		c.Upstreams = make([]Upstream, len(p.Upstreams))
		for i, u := range p.Upstreams {
			u.Config = CloneOpaqueMap(u.Config)
			c.Upstreams[i] = u
		}
	}
	c.Expose.Paths = slices.Clone(p.Expose.Paths)
	return c
}

// Clone returns a deep copy of the service (nil for nil).
func (s *NodeService) Clone() *NodeService {
	if s == nil {
		return nil
	}
	c := *s
	c.Tags = slices.Clone(s.Tags)
	c.Ports = slices.Clone(s.Ports)
	c.TaggedAddresses = maps.Clone(s.TaggedAddresses)
	c.Meta = maps.Clone(s.Meta)
	if s.Weights != nil {
		w := *s.Weights
		c.Weights = &w
	}
	c.Proxy = s.Proxy.Clone()
	c.Locality = s.Locality.Clone()
	return &c
}

// Normalized is a copy of the service that says only what it is: Raft
// indexes and agent-local bookkeeping cleared, and empty lists and maps
// made nil (codecs and JSON clients turn one into the other). Two
// registrations of the same service have equal normalized forms.
func (s *NodeService) Normalized() *NodeService {
	c := s.Clone()
	if c == nil {
		return nil
	}
	c.RaftIndex = RaftIndex{}
	c.LocallyRegisteredAsSidecar = false
	c.Tags = nilIfEmpty(c.Tags)
	if len(c.Ports) == 0 {
		c.Ports = nil
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

// Clone returns a deep copy of the check (nil for nil).
func (h *HealthCheck) Clone() *HealthCheck {
	if h == nil {
		return nil
	}
	c := *h
	c.ServiceTags = slices.Clone(h.ServiceTags)
	c.Definition.Header = cloneHeader(h.Definition.Header)
	return &c
}

// Normalized is a copy of the check without its Raft indexes and with
// empty lists and maps made nil, for comparisons.
func (h *HealthCheck) Normalized() *HealthCheck {
	c := h.Clone()
	if c == nil {
		return nil
	}
	c.RaftIndex = RaftIndex{}
	c.ServiceTags = nilIfEmpty(c.ServiceTags)
	if len(c.Definition.Header) == 0 {
		c.Definition.Header = nil
	}
	return c
}

// Clone returns a deep copy of the check definition (nil for nil).
func (c *CheckType) Clone() *CheckType {
	if c == nil {
		return nil
	}
	out := *c
	out.ScriptArgs = slices.Clone(c.ScriptArgs)
	out.Header = cloneHeader(c.Header)
	return &out
}

// Clone returns a deep copy of the service definition (nil for nil).
func (d *ServiceDefinition) Clone() *ServiceDefinition {
	if d == nil {
		return nil
	}
	c := *d
	c.Tags = slices.Clone(d.Tags)
	c.Meta = maps.Clone(d.Meta)
	c.TaggedAddresses = maps.Clone(d.TaggedAddresses)
	if d.Weights != nil {
		w := *d.Weights
		c.Weights = &w
	}
	c.Check = d.Check.Clone()
	if d.Checks != nil {
		c.Checks = make(CheckTypes, len(d.Checks))
		for i, ct := range d.Checks {
			c.Checks[i] = ct.Clone()
		}
	}
	if d.Proxy != nil {
		p := d.Proxy.Clone()
		c.Proxy = &p
	}
	if d.Connect != nil {
		conn := *d.Connect
		conn.SidecarService = d.Connect.SidecarService.Clone()
		c.Connect = &conn
	}
	return &c
}

// Clone returns a deep copy of the session (nil for nil).
func (s *Session) Clone() *Session {
	if s == nil {
		return nil
	}
	c := *s
	c.NodeChecks = slices.Clone(s.NodeChecks)
	c.ServiceChecks = slices.Clone(s.ServiceChecks)
	return &c
}

// Clone returns a deep copy of the KV entry (nil for nil).
func (e *DirEntry) Clone() *DirEntry {
	if e == nil {
		return nil
	}
	c := *e
	c.Value = bytes.Clone(e.Value)
	return &c
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

func cloneHeader(h map[string][]string) map[string][]string {
	if h == nil {
		return nil
	}
	out := make(map[string][]string, len(h))
	for k, v := range h {
		out[k] = slices.Clone(v)
	}
	return out
}

// cloneOpaque deep-copies decoded JSON-like values (opaque proxy config).
func cloneOpaque(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return CloneOpaqueMap(t)
	case []any:
		if t == nil {
			return t
		}
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = cloneOpaque(e)
		}
		return out
	case []string:
		return slices.Clone(t)
	case map[string]string:
		return maps.Clone(t)
	case []byte:
		return bytes.Clone(t)
	default:
		return v
	}
}

// CloneOpaqueMap deep-copies opaque configuration decoded from JSON or
// msgpack (maps, lists and scalars).
func CloneOpaqueMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneOpaque(v)
	}
	return out
}
