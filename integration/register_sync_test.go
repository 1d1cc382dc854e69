package integration

import (
	"fmt"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestRegisterThenRead: a service or check registered through the agent
// API is in the catalog when the call returns, as with Consul, whose
// agent syncs before it answers: a read right after the register, on the
// same keep-alive connection, never misses it. On a -dev agent and
// through a client agent of a cluster (whose reads go to a server).
func TestRegisterThenRead(t *testing.T) {
	const rounds = 1000
	t.Run("dev", func(t *testing.T) {
		_, dev := startDev(t)
		registerThenRead(t, newConsulClient(t, dev.HTTPAddr()), rounds)
	})
	t.Run("client agent", func(t *testing.T) {
		c, _ := startAgentCluster(t, agentClusterConfig{servers: 1, clients: 1})
		registerThenRead(t, newConsulClient(t, c.Clients()[0].HTTPAddr()), rounds/4)
	})
}

func registerThenRead(t *testing.T, c *api.Client, rounds int) {
	t.Helper()
	misses := 0
	for i := range rounds {
		name := fmt.Sprintf("rtr-%d", i)
		reg := &api.AgentServiceRegistration{ID: name, Name: name, Port: 8000 + i%1000,
			Check: &api.AgentServiceCheck{CheckID: name + "-ttl", TTL: "1h"}}
		if err := c.Agent().ServiceRegister(reg); err != nil {
			t.Fatalf("register %s: %v", name, err)
		}
		checks, _, err := c.Health().Checks(name, nil)
		if err != nil {
			t.Fatalf("health checks %s: %v", name, err)
		}
		if len(checks) == 0 {
			misses++
		}
		if err := c.Agent().ServiceDeregister(name); err != nil {
			t.Fatalf("deregister %s: %v", name, err)
		}
		services, _, err := c.Catalog().Service(name, "", nil)
		if err != nil {
			t.Fatalf("catalog service %s: %v", name, err)
		}
		if len(services) != 0 {
			misses++
		}
	}
	if misses > 0 {
		t.Fatalf("%d of %d reads right after a register or deregister missed it", misses, 2*rounds)
	}
}
