package integration

import (
	"fmt"
	"maps"
	"slices"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/trellis-mesh/trellis/xds/gen"
)

// What a scenario reads from an ADS client: copies of its state, waits
// for conditions on it, settling, and the leaf certificates inside it.

// adsView is a copy of the client's state.
type adsView struct {
	Held map[string]map[string]adsResource
	Acks map[string]typeAck
	Seq  int
	// Last is when the latest response arrived.
	Last  time.Time
	Ended error
}

func (v adsView) names(typeURL string) []string {
	return slices.Sorted(maps.Keys(v.Held[typeURL]))
}

// view copies the client's state.
func (c *adsClient) view() adsView {
	c.mu.Lock()
	defer c.mu.Unlock()
	v := adsView{Held: map[string]map[string]adsResource{}, Acks: map[string]typeAck{}, Seq: len(c.log), Ended: c.ended}
	if len(c.log) > 0 {
		v.Last = c.log[len(c.log)-1].At
	}
	for t, m := range c.held {
		v.Held[t] = maps.Clone(m)
	}
	for t, a := range c.acks {
		v.Acks[t] = *a
	}
	return v
}

// responsesSince returns the responses after sequence number seq.
func (c *adsClient) responsesSince(seq int) []adsResponse {
	c.mu.Lock()
	defer c.mu.Unlock()
	if seq > len(c.log) {
		return nil
	}
	return slices.Clone(c.log[seq:])
}

// waitFor waits up to d for cond to hold on the client's state; it fails
// the test with cond's last error otherwise.
func (c *adsClient) waitFor(d time.Duration, what string, cond func(adsView) error) adsView {
	c.t.Helper()
	v, err := c.await(d, cond)
	if err != nil {
		c.t.Fatalf("%s: %s: %v", c.cfg.Label, what, err)
	}
	return v
}

// await is waitFor returning the error instead of failing.
func (c *adsClient) await(d time.Duration, cond func(adsView) error) (adsView, error) {
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		ch := c.changed
		c.mu.Unlock()
		v := c.view()
		err := cond(v)
		if err == nil {
			return v, nil
		}
		if v.Ended != nil {
			return v, fmt.Errorf("stream ended (%w) while: %w", v.Ended, err)
		}
		select {
		case <-ch:
		case <-deadline.C:
			return v, err
		}
	}
}

// settled reports whether the client holds clusters and listeners and
// every endpoint set and route configuration it subscribed to.
func settled(v adsView) error {
	for _, typeURL := range []string{cdsType, ldsType} {
		if _, ok := v.Acks[typeURL]; !ok || v.Acks[typeURL].AckedNonce == "" {
			return fmt.Errorf("no %s accepted yet", shortType(typeURL))
		}
	}
	for _, typeURL := range []string{edsType, rdsType} {
		for _, n := range wantedNames(v, typeURL) {
			if _, ok := v.Held[typeURL][n]; !ok {
				return fmt.Errorf("%s %q not received", shortType(typeURL), n)
			}
		}
	}
	return nil
}

func wantedNames(v adsView, typeURL string) []string {
	switch typeURL {
	case edsType:
		return edsNames(v.Held[cdsType])
	case rdsType:
		return rdsNames(v.Held[ldsType])
	}
	return nil
}

// waitSettled waits until the client is settled and no response came for
// quiet, then checks the whole state with gen.Validate, dangling
// references included. It returns the state.
func (c *adsClient) waitSettled(d, quiet time.Duration) adsView {
	c.t.Helper()
	deadline := time.Now().Add(d)
	for {
		v := c.waitFor(time.Until(deadline), "settle", settled)
		time.Sleep(quiet)
		if v2 := c.view(); v2.Seq == v.Seq {
			c.validateSettled()
			return v2
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("%s: responses kept coming for %s: %v", c.cfg.Label, d, c.responsesSince(v.Seq))
		}
	}
}

// validateSettled checks the complete state with gen.Validate.
func (c *adsClient) validateSettled() {
	c.t.Helper()
	c.mu.Lock()
	set := c.setLocked(nil)
	c.mu.Unlock()
	if err := gen.Validate(set); err != nil {
		c.t.Errorf("%s: settled state does not validate: %v", c.cfg.Label, err)
	}
	c.check()
}

// leafOf returns the PEM leaf certificate in a TLS context packed in a
// transport socket, or "".
func leafOf(ts *corev3.TransportSocket) string {
	for _, m := range []interface {
		proto.Message
		GetCommonTlsContext() *tlsv3.CommonTlsContext
	}{&tlsv3.DownstreamTlsContext{}, &tlsv3.UpstreamTlsContext{}} {
		if ts.GetTypedConfig().MessageIs(m) && ts.GetTypedConfig().UnmarshalTo(m) == nil {
			for _, c := range m.GetCommonTlsContext().GetTlsCertificates() {
				return c.GetCertificateChain().GetInlineString()
			}
		}
	}
	return ""
}

// withoutLeaf returns a copy of m whose TLS certificates (the leaf and its
// key, inside any packed config) are replaced by a placeholder: each
// agent signs its own leaf for a proxy, everything else must be equal.
func withoutLeaf(m proto.Message) proto.Message {
	out := proto.Clone(m)
	stripLeaf(out.ProtoReflect())
	return out
}

func stripLeaf(m protoreflect.Message) {
	switch x := m.Interface().(type) {
	case *tlsv3.TlsCertificate:
		x.CertificateChain = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "LEAF"}}
		x.PrivateKey = &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: "KEY"}}
		return
	case *anypb.Any:
		inner, err := x.UnmarshalNew()
		if err != nil {
			return
		}
		stripLeaf(inner.ProtoReflect())
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(inner)
		if err == nil {
			x.Value = b
		}
		return
	}
	m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		switch {
		case fd.IsList() && fd.Message() != nil:
			for i := 0; i < v.List().Len(); i++ {
				stripLeaf(v.List().Get(i).Message())
			}
		case fd.IsMap() && fd.MapValue().Message() != nil:
			v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool {
				stripLeaf(mv.Message())
				return true
			})
		case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
			stripLeaf(v.Message())
		}
		return true
	})
}
