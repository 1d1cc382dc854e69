package gen

import (
	"encoding/json"
	"maps"

	"github.com/trellis-mesh/trellis/structs"
)

// Fixtures of the escape-hatch tests: worlds, registrations and the
// JSON users put in the four keys, built as maps so that each case can
// change a field.

// dbSNI is the cluster (and endpoint set) of the db upstream's default
// chain.
const dbSNI = "db.default.dc1.internal." + testTrustDomain

// Type URLs the fixtures pack.
const (
	typeListener  = "type.googleapis.com/envoy.config.listener.v3.Listener"
	typeCluster   = "type.googleapis.com/envoy.config.cluster.v3.Cluster"
	typeTCPProxy  = "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy"
	typeHCM       = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
	typeRouter    = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
	typeCors      = "type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors"
	typeStdoutLog = "type.googleapis.com/envoy.extensions.access_loggers.stream.v3.StdoutAccessLog"
	typeRawBuffer = "type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"
)

type obj = map[string]any

// escapeHatchWorld has web (HTTP when http is set) behind default-deny
// intentions, and db, a TCP service with two instances.
func escapeHatchWorld(http bool) func() *world {
	return func() *world {
		w := newWorld()
		w.defaultDeny = true
		if http {
			w.entries = httpDefaults("web")
		}
		w.intentions["web"] = structs.Intentions{
			intention("api", "web", structs.IntentionActionAllow),
			intention("ops", "web", "", &structs.IntentionPermission{
				Action: structs.IntentionActionAllow, HTTP: &structs.IntentionHTTPPermission{PathPrefix: "/admin"},
			}),
		}
		w.connect["db/dc1"] = sidecars("db", "dc1", inst{addr: "10.0.1.1"}, inst{addr: "10.0.1.2"})
		return w
	}
}

// escapeHatchSidecar is web's sidecar with an upstream to db on 9191,
// its proxy config set to proxyCfg and db's upstream config to dbCfg.
func escapeHatchSidecar(proxyCfg, dbCfg obj) *structs.NodeService {
	s := sidecar("web", structs.Upstream{DestinationName: "db", LocalBindPort: 9191, Config: maps.Clone(dbCfg)})
	s.Proxy.Config = maps.Clone(proxyCfg)
	return s
}

// allEscapeHatches is a registration with all four escape hatches (the
// golden case): web's public listener is an HTTP connection manager
// with access logs and CORS, local_app has a circuit breaker, db's
// cluster balances by least requests with outlier detection, and its
// listener times idle connections out.
func allEscapeHatches() *structs.NodeService {
	return escapeHatchSidecar(obj{
		cfgPublicListenerJSON: mustJSON(publicListenerSpec(httpChain(nil))),
		cfgLocalClusterJSON:   mustJSON(typed(typeCluster, localAppSpec())),
	}, obj{
		cfgClusterJSON:  mustJSON(typed(typeCluster, dbClusterSpec(dbSNI))),
		cfgListenerJSON: mustJSON(typed(typeListener, dbListenerSpec("db_custom:127.0.0.1:9191", dbSNI))),
	})
}

// mustJSON encodes a spec (maps, lists and scalars cannot fail to).
func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// typed adds "@type" to a copy of m.
func typed(typeURL string, m obj) obj {
	out := maps.Clone(m)
	out["@type"] = typeURL
	return out
}

func socketAddr(addr string, port int) obj {
	return obj{"socket_address": obj{"address": addr, "port_value": port}}
}

// publicListenerSpec is a public listener on the registration's address
// with the given chains. The first chain has a plain-text transport
// socket of the user's, which mTLS must replace.
func publicListenerSpec(chains ...obj) obj {
	list := make([]any, len(chains))
	for i, c := range chains {
		list[i] = c
	}
	return obj{
		"name":              "public_listener:10.0.0.1:21000",
		"address":           socketAddr("10.0.0.1", 21000),
		"traffic_direction": "INBOUND",
		"filter_chains":     list,
	}
}

// tcpChain forwards to cluster; match, when set, is its filter chain
// match.
func tcpChain(cluster string, match obj) obj {
	c := obj{"filters": []any{obj{
		"name":         "envoy.filters.network.tcp_proxy",
		"typed_config": obj{"@type": typeTCPProxy, "stat_prefix": "custom_public", "cluster": cluster},
	}}}
	if match != nil {
		c["filter_chain_match"] = match
	}
	return c
}

// httpChain routes everything to local_app through an HTTP connection
// manager with CORS, an access log, and a plain-text transport socket.
func httpChain(match obj) obj {
	c := obj{
		"filters": []any{obj{
			"name": "envoy.filters.network.http_connection_manager",
			"typed_config": obj{
				"@type":       typeHCM,
				"stat_prefix": "custom_public",
				"access_log":  []any{obj{"name": "envoy.access_loggers.stdout", "typed_config": obj{"@type": typeStdoutLog}}},
				"route_config": obj{"name": "custom_local", "virtual_hosts": []any{obj{
					"name": "local", "domains": []any{"*"},
					"routes": []any{obj{"match": obj{"prefix": "/"}, "route": obj{"cluster": "local_app", "timeout": "15s"}}},
				}}},
				"http_filters": []any{
					obj{"name": "envoy.filters.http.cors", "typed_config": obj{"@type": typeCors}},
					obj{"name": "envoy.filters.http.router", "typed_config": obj{"@type": typeRouter}},
				},
			},
		}},
		"transport_socket": obj{"name": "envoy.transport_sockets.raw_buffer", "typed_config": obj{"@type": typeRawBuffer}},
	}
	if match != nil {
		c["filter_chain_match"] = match
	}
	return c
}

// localAppSpec is a static local_app with a circuit breaker.
func localAppSpec() obj {
	return obj{
		"name":             "local_app",
		"type":             "STATIC",
		"connect_timeout":  "2s",
		"circuit_breakers": obj{"thresholds": []any{obj{"priority": "HIGH", "max_requests": 1}}},
		"load_assignment": obj{"cluster_name": "local_app", "endpoints": []any{obj{"lb_endpoints": []any{
			obj{"endpoint": obj{"address": socketAddr("127.0.0.1", 8080)}},
		}}}},
	}
}

// dbClusterSpec is an EDS cluster for db named name.
func dbClusterSpec(name string) obj {
	return obj{
		"name":               name,
		"type":               "EDS",
		"eds_cluster_config": obj{"eds_config": obj{"ads": obj{}, "resource_api_version": "V3"}},
		"connect_timeout":    "1s",
		"lb_policy":          "LEAST_REQUEST",
		"outlier_detection":  obj{"consecutive_5xx": 3, "interval": "10s"},
	}
}

// dbListenerSpec listens on db's bind address and forwards to cluster.
func dbListenerSpec(name, cluster string) obj {
	return obj{
		"name":              name,
		"address":           socketAddr("127.0.0.1", 9191),
		"traffic_direction": "OUTBOUND",
		"filter_chains": []any{obj{"filters": []any{obj{
			"name": "envoy.filters.network.tcp_proxy",
			"typed_config": obj{
				"@type": typeTCPProxy, "stat_prefix": "upstream.db", "cluster": cluster, "idle_timeout": "30s",
			},
		}}}},
	}
}
