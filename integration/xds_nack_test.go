package integration

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// nackText is the error a client rejects listeners with; proxy-status must
// show it verbatim (several lines, quotes, non-ASCII, as Envoy's can be).
const nackText = "Error adding/updating listener(s) public_listener:0.0.0.0:21001: cannot bind '0.0.0.0:21001': Address already in use\n" +
	"second line: \"quoted\" ✗ 100%"

// suppressWindow is how long a NACKed type must stay silent.
const suppressWindow = 1500 * time.Millisecond

// ldsResponses returns the listener responses a client received after
// sequence number seq.
func ldsResponses(c *adsClient, seq int) []adsResponse {
	var out []adsResponse
	for _, r := range c.responsesSince(seq) {
		if r.TypeURL == ldsType {
			out = append(out, r)
		}
	}
	return out
}

// lastLDSHas reports an error unless the latest listener response among
// the client's first seq responses holds the listener named name.
func lastLDSHas(c *adsClient, seq int, name string) error {
	rs := c.responsesSince(0)
	for i := min(seq, len(rs)) - 1; i >= 0; i-- {
		if rs[i].TypeURL != ldsType {
			continue
		}
		if !slices.Contains(rs[i].names(), name) {
			return fmt.Errorf("latest listener response %v lacks %s", rs[i], name)
		}
		return nil
	}
	return fmt.Errorf("no listener response yet")
}

// TestXDSNack: clients that reject listeners (delta and state-of-the-world,
// on the client agent and on a server). The NACK shows in proxy-status
// with the client's error text verbatim, the rejected listeners are not
// sent again while only other parts of the snapshot change, and they are
// once the listeners change; a rejected update leaves the last accepted
// version acknowledged.
func TestXDSNack(t *testing.T) {
	m := startMesh(t)
	var reject atomic.Bool
	reject.Store(true)
	policy := func(string) nackPolicy {
		return func(r adsResponse) string {
			if r.TypeURL == ldsType && reject.Load() {
				return nackText
			}
			return ""
		}
	}
	web := m.openStreams("web-sidecar-proxy", policy)
	apiCluster := m.sni("api")

	upstreamListener := fmt.Sprintf("api:127.0.0.1:%d", apiBindPort)
	lastNacked := map[*adsClient]string{}
	// nackedAt is each client's sequence number once the complete listener
	// set was rejected. Before it, a server may have sent listeners without
	// the upstream's (its snapshot is valid before the upstream's discovery
	// chain arrives, as in Consul), which is a change and rightly sent.
	nackedAt := map[*adsClient]int{}
	phase(t, "a rejected listener response shows in proxy-status")
	{
		for _, c := range web.all() {
			v := c.waitFor(meshSettleTimeout, "listeners rejected", func(v adsView) error {
				if v.Acks[ldsType].NackedNonce == "" || v.Acks[ldsType].NackedNonce != v.Acks[ldsType].LastNonce {
					return fmt.Errorf("latest listener response not rejected yet")
				}
				if err := lastLDSHas(c, v.Seq, upstreamListener); err != nil {
					return err
				}
				if n := endpointCount(v, apiCluster); n != 1 {
					return fmt.Errorf("%d endpoints of %s", n, apiCluster)
				}
				return nil
			})
			lastNacked[c] = v.Acks[ldsType].NackedVersion
			nackedAt[c] = v.Seq
			st := m.waitStatusMatches(m.agentOf(c), c)
			lds, _ := st.typeStatus(ldsType)
			if lds.LastNackError != nackText || !lds.Suppressed || lds.LastAckedVersion != "" {
				t.Errorf("%s: LDS status %+v", c.cfg.Label, lds)
			}
		}
	}

	phase(t, "rejected listeners are not re-sent while only endpoints change")
	{
		m.register(m.client, sidecarService("api-2", "api", 8082))
		for _, c := range web.all() {
			c.waitFor(updateTimeout, "second api endpoint", func(v adsView) error {
				if n := endpointCount(v, apiCluster); n != 2 {
					return fmt.Errorf("%d endpoints of %s", n, apiCluster)
				}
				return nil
			})
		}
		time.Sleep(suppressWindow)
		for _, c := range web.all() {
			if again := ldsResponses(c, nackedAt[c]); len(again) != 0 {
				t.Errorf("%s: listeners re-sent after the rejection: %v (all responses: %v)", c.cfg.Label, again, c.responsesSince(0))
			}
			m.waitStatusMatches(m.agentOf(c), c)
		}
	}

	phase(t, "changed listeners are sent again and accepted")
	{
		reject.Store(false)
		m.intention("intruder", "web", "deny")
		for _, c := range web.all() {
			c.waitFor(updateTimeout, "accepted listeners", func(v adsView) error {
				got, err := publicRBAC(v)
				if err != nil {
					return err
				}
				if !strings.Contains(got, "[intruder]") {
					return fmt.Errorf("RBAC %q", got)
				}
				return nil
			})
			v := c.waitSettled(meshSettleTimeout, settleQuiet)
			if a := v.Acks[ldsType]; a.AckedVersion == lastNacked[c] || a.NackedVersion != lastNacked[c] {
				t.Errorf("%s: LDS acked %q, nacked %q; rejected before %q", c.cfg.Label, a.AckedVersion, a.NackedVersion, lastNacked[c])
			}
			st := m.waitStatusMatches(m.agentOf(c), c)
			if lds, _ := st.typeStatus(ldsType); lds.Suppressed || lds.LastNackError != nackText {
				t.Errorf("%s: LDS status %+v, want not suppressed, the old NACK kept", c.cfg.Label, lds)
			}
		}
	}

	phase(t, "a rejected update keeps the last accepted version")
	{
		reject.Store(true)
		before := map[*adsClient]adsView{}
		for _, c := range web.all() {
			before[c] = c.view()
		}
		m.intention("intruder-2", "web", "deny")
		for _, c := range web.all() {
			v := c.waitFor(updateTimeout, "update rejected", func(v adsView) error {
				if v.Acks[ldsType].NackedNonce == before[c].Acks[ldsType].NackedNonce {
					return fmt.Errorf("no new rejection")
				}
				return nil
			})
			if v.Acks[ldsType].AckedVersion != before[c].Acks[ldsType].AckedVersion {
				t.Errorf("%s: acked version moved", c.cfg.Label)
			}
			if got, _ := publicRBAC(v); strings.Contains(got, "intruder-2") {
				t.Errorf("%s: the rejected RBAC %q is held", c.cfg.Label, got)
			}
		}
		time.Sleep(suppressWindow)
		for _, c := range web.all() {
			v := c.view()
			ldsAfter := ldsResponses(c, before[c].Seq)
			if len(ldsAfter) != 1 {
				t.Errorf("%s: %d listener responses after the change, want the one rejected: %v", c.cfg.Label, len(ldsAfter), ldsAfter)
			}
			st := m.waitStatusMatches(m.agentOf(c), c)
			lds, _ := st.typeStatus(ldsType)
			if lds.LastAckedVersion != before[c].Acks[ldsType].AckedVersion || lds.LastNackedVersion != v.Acks[ldsType].NackedVersion || !lds.Suppressed {
				t.Errorf("%s: LDS status %+v", c.cfg.Label, lds)
			}
		}
	}

	// The agents log each NACK with the client's error text.
	for _, a := range []string{m.client.Node(), m.server.Node()} {
		for _, ag := range m.c.Agents() {
			if ag.Node() != a {
				continue
			}
			logs, err := ag.Logs()
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(logs, "envoy rejected config") || !strings.Contains(logs, "Address already in use") {
				t.Errorf("%s did not log the NACK with its error text", a)
			}
		}
	}
}
