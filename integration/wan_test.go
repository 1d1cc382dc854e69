package integration

import (
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/integration/harness"
)

// TestWANJoinTwoDatacenters: two -dev servers in dc1 and dc2 on loopback.
// Joining dc2's server to dc1's WAN address through the HTTP API
// (?wan=1) puts both in each one's WAN pool, named <node>.<dc>; ?filter
// narrows the list; /v1/catalog/datacenters lists both datacenters with
// the agent's own first; `members -wan` prints the pool.
func TestWANJoinTwoDatacenters(t *testing.T) {
	bin := requireBinary(t)
	dev := func(node, dc string) (*harness.Cluster, *harness.Agent) {
		c := harness.StartDev(t, harness.DevConfig{Binary: bin, Ports: newPorts(t), Node: node, ExtraArgs: []string{"-datacenter", dc}})
		return c, waitLeader(t, c, clusterStartTimeout)
	}
	_, s1 := dev("one", "dc1")
	_, s2 := dev("two", "dc2")
	c1, c2 := newConsulClient(t, s1.HTTPAddr()), newConsulClient(t, s2.HTTPAddr())

	wanAddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(s1.Ports().SerfWAN))
	if err := c2.Agent().Join(wanAddr, true); err != nil {
		t.Fatalf("WAN join: %v", err)
	}
	wanNames := func(c *api.Client, filter string) ([]string, error) {
		ms, err := c.Agent().MembersOpts(api.MembersOpts{WAN: true, Filter: filter})
		if err != nil {
			return nil, err
		}
		var names []string
		for _, m := range ms {
			if m.Status == serfAlive {
				names = append(names, m.Name)
			}
		}
		slices.Sort(names)
		return names, nil
	}
	want := []string{"one.dc1", "two.dc2"}
	for _, c := range []*api.Client{c1, c2} {
		eventually(t, 10*time.Second, "both servers in the WAN pool", func() error {
			got, err := wanNames(c, "")
			if err != nil {
				return err
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("WAN members %q, want %q", got, want)
			}
			return nil
		})
	}
	if got, err := wanNames(c1, `Tags["dc"] == dc2`); err != nil || !slices.Equal(got, []string{"two.dc2"}) {
		t.Errorf("WAN members of dc2: %q, %v", got, err)
	}
	if lan, err := c1.Agent().Members(false); err != nil || len(lan) != 1 || lan[0].Name != "one" {
		t.Errorf("LAN members of dc1's server: %v, %v", lan, err)
	}

	for _, tc := range []struct {
		c    *api.Client
		want []string
	}{{c1, []string{"dc1", "dc2"}}, {c2, []string{"dc2", "dc1"}}} {
		dcs, err := tc.c.Catalog().Datacenters()
		if err != nil || !slices.Equal(dcs, tc.want) {
			t.Errorf("datacenters %q (%v), want %q", dcs, err, tc.want)
		}
	}

	out, err := exec.Command(bin, "members", "-wan", "-http-addr", s1.HTTPURL()).CombinedOutput()
	if err != nil {
		t.Fatalf("members -wan: %v\n%s", err, out)
	}
	for _, name := range want {
		if !strings.Contains(string(out), name) {
			t.Errorf("members -wan lacks %s:\n%s", name, out)
		}
	}
}
