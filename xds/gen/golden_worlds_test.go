package gen

import (
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// --- worlds of the golden cases ----------------------------------------

// routedWorld has api behind a router, a splitter over two subsets, and an
// admin service failing over to another.
func routedWorld() *world {
	w := newWorld()
	w.entries = append(httpDefaults("web", "api", "admin", "admin-backup"),
		&structs.ServiceResolverConfigEntry{
			Kind: structs.ServiceResolver, Name: "api", DefaultSubset: "v1",
			ConnectTimeout: structs.Duration(3 * time.Second),
			Subsets: map[string]structs.ServiceResolverSubset{
				"v1": {Filter: `Service.Meta.version == "v1"`},
				"v2": {Filter: `Service.Meta.version == "v2"`, OnlyPassing: true},
			},
		},
		&structs.ServiceSplitterConfigEntry{Kind: structs.ServiceSplitter, Name: "api", Splits: []structs.ServiceSplit{
			{Weight: 90, ServiceSubset: "v1"},
			{Weight: 10, ServiceSubset: "v2", RequestHeaders: &structs.HTTPHeaderModifiers{Set: map[string]string{"x-canary": "1"}}},
		}},
		&structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "api", Routes: []structs.ServiceRoute{
			{
				Match: &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{
					PathPrefix: "/v2/",
					Header:     []structs.ServiceRouteHTTPMatchHeader{{Name: "x-debug", Present: true}},
				}},
				Destination: &structs.ServiceRouteDestination{
					ServiceSubset: "v2", PrefixRewrite: "/", RequestTimeout: structs.Duration(5 * time.Second),
					NumRetries: 3, RetryOnConnectFailure: true, RetryOnStatusCodes: []uint32{503},
				},
			},
			{
				Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathExact: "/admin", Methods: []string{"GET", "POST"}}},
				Destination: &structs.ServiceRouteDestination{Service: "admin", RequestHeaders: &structs.HTTPHeaderModifiers{Add: map[string]string{"x-via": "router"}, Remove: []string{"cookie"}}},
			},
			{
				Match: &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{
					PathRegex: "/users/[0-9]+", CaseInsensitive: true,
					QueryParam: []structs.ServiceRouteHTTPMatchQueryParam{{Name: "canary", Exact: "1"}, {Name: "trace", Present: true}},
					Header:     []structs.ServiceRouteHTTPMatchHeader{{Name: "x-env", Regex: "stag.*", Invert: true}},
				}},
				Destination: &structs.ServiceRouteDestination{ServiceSubset: "v2", IdleTimeout: structs.Duration(30 * time.Second), RetryOn: []string{"5xx", "reset"}},
			},
		}},
		&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "admin", Failover: map[string]structs.ServiceResolverFailover{
			"*": {Service: "admin-backup"},
		}},
	)
	w.connect["api/dc1"] = sidecars("api", "dc1",
		inst{addr: "10.0.2.1", meta: map[string]string{"version": "v1"}},
		inst{addr: "10.0.2.2", meta: map[string]string{"version": "v1"}},
		inst{addr: "10.0.2.3", meta: map[string]string{"version": "v2"}},
		inst{addr: "10.0.2.4", meta: map[string]string{"version": "v2"}, status: structs.HealthWarning},
	)
	w.connect["admin/dc1"] = sidecars("admin", "dc1", inst{addr: "10.0.3.1"})
	w.connect["admin-backup/dc1"] = sidecars("admin-backup", "dc1", inst{addr: "10.0.4.1"})
	return w
}

func transparentSidecar() *structs.NodeService {
	s := sidecar("web", structs.Upstream{DestinationName: "cache", LocalBindPort: 9393})
	s.Proxy.Mode = structs.ProxyModeTransparent
	return s
}

// transparentWorld lets web reach api (HTTP) and db by intentions,
// besides its explicit cache upstream. Each has a virtual IP as the
// servers assign them (the instances carry api's and cache's, as the
// catalog shows them); db has a manual one too, and api's instances a
// Kubernetes ClusterIP. billing has a virtual IP and no instances yet.
func transparentWorld(meshOnly bool) func() *world {
	return func() *world {
		w := newWorld()
		w.entries = append(httpDefaults("api"),
			&structs.MeshConfigEntry{TransparentProxy: structs.TransparentProxyMeshConfig{MeshDestinationsOnly: meshOnly}})
		w.intentionUpstreams["web"] = []string{"api", "billing", "db"}
		w.virtualIPs = map[string]*structs.ServiceVirtualIP{
			"api":     {Service: "api", IP: "240.0.0.1"},
			"cache":   {Service: "cache", IP: "240.0.0.2"},
			"db":      {Service: "db", IP: "240.0.0.3", ManualIPs: []string{"10.100.0.3"}},
			"billing": {Service: "billing", IP: "240.0.0.4"},
		}
		tagged := func(vip string, port int) map[string]structs.ServiceAddress {
			return map[string]structs.ServiceAddress{structs.TaggedAddressVirtualIP: {Address: vip, Port: port}}
		}
		apiTags := tagged("240.0.0.1", 21000)
		apiTags["virtual"] = structs.ServiceAddress{Address: "10.96.0.10", Port: 80}
		w.connect["api/dc1"] = sidecars("api", "dc1",
			inst{addr: "10.0.2.1", tagged: apiTags},
			inst{addr: "10.0.2.2", tagged: apiTags},
		)
		w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
		// cache shares a node with db: the two claim different ports there.
		w.connect["cache/dc1"] = sidecars("cache", "dc1", inst{addr: "10.0.1.1", port: 21001, tagged: tagged("240.0.0.2", 21001)})
		w.connect["cache/dc1"][0].Service.Proxy.LocalServicePort = 6379
		return w
	}
}

func ingressWorld() *world {
	w := newWorld()
	w.entries = append(httpDefaults("api", "web", "admin"),
		&structs.ServiceRouterConfigEntry{Kind: structs.ServiceRouter, Name: "api", Routes: []structs.ServiceRoute{{
			Match:       &structs.ServiceRouteMatch{HTTP: &structs.ServiceRouteHTTPMatch{PathPrefix: "/admin"}},
			Destination: &structs.ServiceRouteDestination{Service: "admin"},
		}}},
		&structs.IngressGatewayConfigEntry{Kind: structs.IngressGateway, Name: "ingress", Listeners: []structs.IngressListener{
			{Port: 8080, Protocol: "http", Services: []structs.IngressService{
				{Name: "api", Hosts: []string{"api.example.com", "api.example.com:8080"},
					RequestHeaders: &structs.HTTPHeaderModifiers{Set: map[string]string{"x-gateway": "ingress"}}},
				{Name: "web"},
			}},
			{Port: 8443, Protocol: "http", TLS: &structs.GatewayTLSConfig{Enabled: true}, Services: []structs.IngressService{
				{Name: "admin", Hosts: []string{"admin.example.com"}},
			}},
			{Port: 9000, Protocol: "tcp", Services: []structs.IngressService{{Name: "db"}}},
		}},
	)
	w.connect["api/dc1"] = sidecars("api", "dc1", inst{addr: "10.0.2.1"})
	w.connect["web/dc1"] = sidecars("web", "dc1", inst{addr: "10.0.5.1"}, inst{addr: "10.0.5.2"})
	w.connect["admin/dc1"] = sidecars("admin", "dc1", inst{addr: "10.0.3.1"})
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
	return w
}

func terminatingWorld() *world {
	w := newWorld()
	w.defaultDeny = true
	w.entries = append(httpDefaults("legacy"),
		&structs.TerminatingGatewayConfigEntry{Kind: structs.TerminatingGateway, Name: "terminating", Services: []structs.LinkedService{
			{Name: "billing", CAFile: "/etc/trellis/billing-ca.pem", CertFile: "/etc/trellis/billing.pem", KeyFile: "/etc/trellis/billing-key.pem", SNI: "billing.example.com"},
			{Name: "legacy"},
		}},
		&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "legacy", ConnectTimeout: structs.Duration(10 * time.Second),
			RequestTimeout: structs.Duration(20 * time.Second),
			Subsets:        map[string]structs.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "v1"`}}},
	)
	w.intentions["billing"] = structs.Intentions{intention("web", "billing", structs.IntentionActionAllow)}
	w.instances["billing"] = plainInstances("billing", inst{addr: "203.0.113.10"}, inst{addr: "203.0.113.11", status: structs.HealthCritical})
	w.instances["legacy"] = plainInstances("legacy",
		inst{addr: "legacy.example.com", port: 80},
		inst{addr: "203.0.113.20", port: 80, meta: map[string]string{"version": "v1"}},
	)
	return w
}

// behindTerminatingWorld is terminatingWorld seen from a sidecar: the
// Connect endpoints of billing, linked to the gateway, are the gateway's
// instance, as the store answers a Connect health read for it.
func behindTerminatingWorld() *world {
	w := terminatingWorld()
	w.connect["billing/dc1"] = terminatingGatewayNodes("terminating", "10.0.0.50", 8443)
	return w
}

func meshGatewayWorld() *world {
	w := newWorld()
	w.datacenters = []string{"dc1", "dc2", "dc3"}
	// The catalog lists the sidecars' and the gateway's own names and a
	// service outside the mesh too: none of them gets a cluster.
	w.services = []string{"consul", "db", "db-sidecar-proxy", "legacy", "mesh-gateway", "web", "web-sidecar-proxy"}
	w.entries = []structs.ConfigEntry{
		&structs.ServiceResolverConfigEntry{Kind: structs.ServiceResolver, Name: "db",
			Subsets: map[string]structs.ServiceResolverSubset{"v1": {Filter: `Service.Meta.version == "v1"`}}},
	}
	w.connect["db/dc1"] = sidecars("db", "dc1",
		inst{addr: "10.0.1.1", meta: map[string]string{"version": "v1"}},
		inst{addr: "10.0.1.2", meta: map[string]string{"version": "v2"}})
	w.connect["web/dc1"] = sidecars("web", "dc1", inst{addr: "10.0.5.1"})
	w.meshGateways["dc2"] = meshGatewayNodes("dc2", [2]string{"10.2.0.100", "198.51.100.2"})
	w.meshGateways["dc3"] = structs.CheckServiceNodes{}
	return w
}

// exposeWorld has web as an HTTP service whose service-defaults expose
// /ready, and db behind web's upstream.
func exposeWorld() *world {
	w := newWorld()
	w.entries = []structs.ConfigEntry{
		&structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web", Protocol: "http", Expose: structs.ExposeConfig{
			Paths: []structs.ExposePath{{Path: "/ready", ListenerPort: 21502, LocalPathPort: 9091}},
		}},
	}
	w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
	return w
}

// exposeSidecar is web's sidecar exposing its HTTP health path and its
// gRPC health check.
func exposeSidecar() *structs.NodeService {
	s := sidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191})
	s.Proxy.Expose.Paths = []structs.ExposePath{
		{Path: "/health", ListenerPort: 21500, LocalPathPort: 8080, Protocol: "http"},
		{Path: "/grpc.health.v1.Health/Check", ListenerPort: 21501, LocalPathPort: 9090, Protocol: "http2"},
	}
	return s
}

// accessLogsWorld has db (TCP) and api (HTTP) behind web's upstreams and
// proxy-defaults turning access logs on with Consul's defaults (stdout,
// the default JSON format, listener logs) plus any edit of them.
func accessLogsWorld(edit func(*structs.AccessLogsConfig)) func() *world {
	return func() *world {
		w := newWorld()
		logs := structs.AccessLogsConfig{Enabled: true}
		if edit != nil {
			edit(&logs)
		}
		w.entries = append(httpDefaults("api"),
			&structs.ProxyConfigEntry{Kind: structs.ProxyDefaults, Name: structs.ProxyConfigGlobal, AccessLogs: logs})
		w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"})
		w.connect["api/dc1"] = sidecars("api", "dc1", inst{addr: "10.0.2.1"})
		return w
	}
}

// accessLogsSidecar is web's sidecar with a TCP (db) and an HTTP (api)
// upstream.
func accessLogsSidecar() *structs.NodeService {
	return sidecar("web",
		structs.Upstream{DestinationName: "db", LocalBindPort: 9191},
		structs.Upstream{DestinationName: "api", LocalBindPort: 9292})
}
