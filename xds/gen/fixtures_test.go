package gen

import (
	"fmt"

	"github.com/trellis-mesh/trellis/structs"
)

// inst describes one service instance.
type inst struct {
	addr    string
	status  string // passing when empty
	meta    map[string]string
	weights *structs.Weights
	// tagged are the service's tagged addresses (virtual IPs, lan/wan).
	tagged map[string]structs.ServiceAddress
	port   int // 0: the kind's default
}

// sidecars returns the Connect endpoints of service in dc: one sidecar per
// instance, on port 21000, in front of the application on 8080.
func sidecars(service, dc string, insts ...inst) structs.CheckServiceNodes {
	out := structs.CheckServiceNodes{}
	for i, in := range insts {
		port := in.port
		if port == 0 {
			port = 21000
		}
		node := &structs.Node{Node: fmt.Sprintf("%s-node-%d", dc, i+1), Address: in.addr, Datacenter: dc}
		svc := &structs.NodeService{
			Kind: structs.ServiceKindConnectProxy, ID: fmt.Sprintf("%s-sidecar-proxy-%d", service, i+1), Service: service + "-sidecar-proxy",
			Address: in.addr, Port: port, Meta: in.meta, Weights: in.weights, TaggedAddresses: in.tagged,
			Proxy: structs.ConnectProxyConfig{DestinationServiceName: service, LocalServiceAddress: "127.0.0.1", LocalServicePort: 8080},
		}
		out = append(out, structs.CheckServiceNode{Node: node, Service: svc, Checks: checks(node.Node, svc.ID, in.status)})
	}
	return out
}

// plainInstances returns a service's own instances (for terminating
// gateways), on port 443 unless inst says otherwise.
func plainInstances(service string, insts ...inst) structs.CheckServiceNodes {
	out := structs.CheckServiceNodes{}
	for i, in := range insts {
		port := in.port
		if port == 0 {
			port = 443
		}
		node := &structs.Node{Node: fmt.Sprintf("external-%d", i+1), Address: "192.0.2.1", Datacenter: "dc1"}
		svc := &structs.NodeService{ID: fmt.Sprintf("%s-%d", service, i+1), Service: service, Address: in.addr, Port: port, Meta: in.meta}
		out = append(out, structs.CheckServiceNode{Node: node, Service: svc, Checks: checks(node.Node, svc.ID, in.status)})
	}
	return out
}

// terminatingGatewayNodes returns one instance of the terminating gateway
// name, registered with its address on its own node.
func terminatingGatewayNodes(name, addr string, port int) structs.CheckServiceNodes {
	node := &structs.Node{Node: name + "-node", Address: addr, Datacenter: "dc1"}
	svc := &structs.NodeService{Kind: structs.ServiceKindTerminatingGateway, ID: name, Service: name, Address: addr, Port: port}
	return structs.CheckServiceNodes{{Node: node, Service: svc, Checks: checks(node.Node, svc.ID, "")}}
}

// meshGatewayNodes returns mesh gateways of a datacenter with lan and wan
// tagged addresses.
func meshGatewayNodes(dc string, lanWAN ...[2]string) structs.CheckServiceNodes {
	out := structs.CheckServiceNodes{}
	for i, a := range lanWAN {
		node := &structs.Node{Node: fmt.Sprintf("%s-gw-node-%d", dc, i+1), Address: a[0], Datacenter: dc}
		svc := &structs.NodeService{
			Kind: structs.ServiceKindMeshGateway, ID: fmt.Sprintf("mesh-gateway-%d", i+1), Service: "mesh-gateway",
			Address: a[0], Port: 8443,
			TaggedAddresses: map[string]structs.ServiceAddress{
				"lan": {Address: a[0], Port: 8443},
				"wan": {Address: a[1], Port: 443},
			},
		}
		out = append(out, structs.CheckServiceNode{Node: node, Service: svc, Checks: checks(node.Node, svc.ID, "")})
	}
	return out
}

func checks(node, serviceID, status string) structs.HealthChecks {
	if status == "" {
		status = structs.HealthPassing
	}
	return structs.HealthChecks{
		{Node: node, CheckID: structs.SerfCheckID, Status: structs.HealthPassing},
		{Node: node, CheckID: "service:" + serviceID, Status: status, ServiceID: serviceID},
	}
}

// sidecar is the registration of service's sidecar proxy.
func sidecar(service string, upstreams ...structs.Upstream) *structs.NodeService {
	return &structs.NodeService{
		Kind: structs.ServiceKindConnectProxy, ID: service + "-sidecar-proxy", Service: service + "-sidecar-proxy",
		Address: "10.0.0.1", Port: 21000,
		Proxy: structs.ConnectProxyConfig{
			DestinationServiceName: service, DestinationServiceID: service,
			LocalServiceAddress: "127.0.0.1", LocalServicePort: 8080, Upstreams: upstreams,
		},
	}
}

func gateway(kind structs.ServiceKind, name string, port int) *structs.NodeService {
	return &structs.NodeService{Kind: kind, ID: name, Service: name, Address: "10.0.0.50", Port: port}
}

func httpDefaults(names ...string) []structs.ConfigEntry {
	var out []structs.ConfigEntry
	for _, n := range names {
		out = append(out, &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: n, Protocol: "http"})
	}
	return out
}

func intention(src, dst string, action structs.IntentionAction, perms ...*structs.IntentionPermission) *structs.Intention {
	ixn := &structs.Intention{
		SourceNS: "default", SourceName: src, DestinationNS: "default", DestinationName: dst,
		SourceType: structs.IntentionSourceConsul, Action: action, Permissions: perms,
		Precedence: structs.IntentionPrecedence(src, dst),
	}
	if len(perms) > 0 {
		ixn.Action = ""
	}
	return ixn
}
