package cli

import (
	"context"
	"fmt"
	"net"
	"strconv"
)

// gatewayRegistration is the body of PUT /v1/agent/service/register for a
// gateway, with the fields and omissions of the official client's
// AgentServiceRegistration.
type gatewayRegistration struct {
	Kind            string
	ID              string
	Name            string
	Port            int                          `json:",omitempty"`
	Address         string                       `json:",omitempty"`
	TaggedAddresses map[string]gatewayTaggedAddr `json:",omitempty"`
	Check           gatewayCheck
}

// gatewayTaggedAddr is a ServiceAddress.
type gatewayTaggedAddr struct {
	Address string
	Port    int
}

// gatewayCheck is the TCP check Consul registers with a gateway.
type gatewayCheck struct {
	Name                           string
	TCP                            string
	Interval                       string
	DeregisterCriticalServiceAfter string
}

// registerGateway registers the gateway service (Kind, name, ID, LAN and WAN
// addresses, a TCP check on the LAN address) on the local agent, as
// `consul connect envoy -register` does.
func (c *connectEnvoyCmd) registerGateway(ctx context.Context, client *apiClient) error {
	lanAddr, lanPort := c.lanAddress.value()
	reg := gatewayRegistration{
		Kind:    c.gatewayKind,
		ID:      c.proxyID,
		Name:    c.service,
		Address: lanAddr,
		Port:    lanPort,
	}
	tagged := map[string]gatewayTaggedAddr{}
	if lanAddr != "" {
		tagged["lan"] = gatewayTaggedAddr{Address: lanAddr, Port: lanPort}
	}
	if c.wanAddress.set {
		a, p := c.wanAddress.value()
		tagged["wan"] = gatewayTaggedAddr{Address: a, Port: p}
	}
	if len(tagged) > 0 {
		reg.TaggedAddresses = tagged
	}
	checkAddr := lanAddr
	if checkAddr == "" {
		// The gateway shares the agent's network namespace.
		checkAddr = "127.0.0.1"
	}
	reg.Check = gatewayCheck{
		Name:                           c.gatewayKind + " listening",
		TCP:                            net.JoinHostPort(checkAddr, strconv.Itoa(lanPort)),
		Interval:                       "10s",
		DeregisterCriticalServiceAfter: c.deregAfterCritical,
	}
	if _, err := client.put(ctx, "/v1/agent/service/register", nil, reg); err != nil {
		return fmt.Errorf("Error registering service %q: %w", reg.Name, err)
	}
	return nil
}
