package config

import (
	"encoding/json"
	"sort"
	"strings"
)

// keyStatus says what Trellis does with a Consul config key.
type keyStatus int

const (
	// keyHonoured: Trellis reads the key and acts on it.
	keyHonoured keyStatus = iota
	// keyNoop: Consul accepts the key but nothing needs doing in Trellis,
	// either because Consul itself ignores user values for it (version,
	// revision, ...) or because Trellis never does what it would disable
	// (update checks, anonymous signatures, remote exec).
	keyNoop
	// keyIgnored: a Consul key that Trellis does not implement. It is
	// accepted, and named in the start-up warning when it carries a value.
	keyIgnored
	// keyRefused: a Consul key that asks for protection (ACLs, TLS, gossip
	// address restrictions) Trellis does not provide yet. A
	// value that asks for it (true, a non-empty string or list, a non-zero
	// number) is a start-up error naming the key: running unprotected
	// while the operator believes otherwise is worse than not running. A
	// value that only relaxes (false, 0, "") is accepted.
	keyRefused
)

// keyNode is one node of the tree of keys Consul's agent config accepts.
// A node with children is an object whose keys are checked; a leaf accepts
// any value. Keys are matched in lower case, as Consul's decoder (mapstructure)
// matches them case-insensitively.
type keyNode struct {
	status   keyStatus
	children map[string]*keyNode
	// open: keys not listed in children are Consul keys too (node_meta,
	// connect.ca_config, whose keys depend on the CA provider). They are
	// reported with the status openStatus instead of being invalid.
	open       bool
	openStatus keyStatus
	// feature names, for a refused key, the protection it asks for.
	feature string
}

func honoured() *keyNode { return &keyNode{status: keyHonoured} }
func noop() *keyNode     { return &keyNode{status: keyNoop} }
func ignored() *keyNode  { return &keyNode{status: keyIgnored} }

// refused marks a key asking for feature, which Trellis does not provide.
func refused(feature string) *keyNode {
	return &keyNode{status: keyRefused, feature: feature}
}

// refusedBlock marks a whole block whose every key asks for feature
// (tls, auto_encrypt, auto_config); keys inside are reported by their full
// path.
func refusedBlock(feature string) *keyNode {
	return &keyNode{status: keyRefused, open: true, openStatus: keyRefused, feature: feature}
}

// refusedAll marks each name as refused for feature.
func refusedAll(feature string, names ...string) map[string]*keyNode {
	m := make(map[string]*keyNode, len(names))
	for _, n := range names {
		m[n] = refused(feature)
	}
	return m
}

func object(children map[string]*keyNode) *keyNode {
	return &keyNode{status: keyHonoured, children: children}
}

// ignoredAll marks each name as an ignored leaf.
func ignoredAll(names ...string) map[string]*keyNode {
	m := make(map[string]*keyNode, len(names))
	for _, n := range names {
		m[n] = ignored()
	}
	return m
}

// with adds entries to m and returns it.
func with(m map[string]*keyNode, add map[string]*keyNode) map[string]*keyNode {
	for k, v := range add {
		m[k] = v
	}
	return m
}

// consulKeys returns the tree of every key Consul 1.22's agent accepts in a
// JSON config file (agent/config/config.go and deprecated.go upstream),
// marked with what Trellis does with it. A key outside this tree is not a
// Consul key at all and is rejected, as Consul rejects it.
//
// Blocks Trellis ignores wholesale (tls, telemetry, services, ...) are leaves:
// their content is not checked, and the block is named once in the warning.
//
// It is built per call rather than kept in a package variable so that no
// caller can mutate shared state.
func consulKeys() *keyNode {
	top := map[string]*keyNode{
		// Identity and roles.
		"node_name":        honoured(),
		"node_id":          honoured(),
		"node_meta":        {status: keyHonoured, open: true, openStatus: keyHonoured},
		"datacenter":       honoured(),
		"data_dir":         honoured(),
		"server":           honoured(),
		"bootstrap":        honoured(),
		"bootstrap_expect": honoured(),

		// Addresses and ports.
		"bind_addr":      honoured(),
		"advertise_addr": honoured(),
		"client_addr":    honoured(),
		"serf_lan":       honoured(),
		"addresses": object(map[string]*keyNode{
			"http":     honoured(),
			"grpc":     honoured(),
			"dns":      honoured(),
			"https":    honoured(),
			"grpc_tls": honoured(),
		}),
		"ports": object(map[string]*keyNode{
			"http":             honoured(),
			"grpc":             honoured(),
			"server":           honoured(),
			"serf_lan":         honoured(),
			"sidecar_min_port": honoured(),
			"sidecar_max_port": honoured(),
			"dns":              honoured(),
			"https":            honoured(),
			"grpc_tls":         honoured(),
			"serf_wan":         honoured(), // servers' WAN pool; -1 turns it off
			"proxy_min_port":   ignored(),
			"proxy_max_port":   ignored(),
			"expose_min_port":  ignored(),
			"expose_max_port":  ignored(),
		}),

		// Joining and leaving.
		"retry_join":              honoured(),
		"retry_interval":          honoured(),
		"retry_max":               honoured(),
		"start_join":              honoured(), // deprecated alias of retry_join
		"leave_on_terminate":      honoured(),
		"skip_leave_on_interrupt": honoured(),
		"reconnect_timeout":       honoured(),

		// Timing and limits.
		"session_ttl_min":       honoured(),
		"ae_interval":           honoured(),
		"check_update_interval": honoured(),
		"locality": object(map[string]*keyNode{
			"region": honoured(),
			"zone":   honoured(),
		}),
		"performance": object(map[string]*keyNode{
			"raft_multiplier":  honoured(),
			"leave_drain_time": ignored(),
			"rpc_hold_timeout": ignored(),
		}),
		"limits": object(with(ignoredAll(
			"http_max_conns_per_client", "https_handshake_timeout", "request_limits",
			"rpc_client_timeout", "rpc_handshake_timeout", "rpc_max_burst",
			"rpc_max_conns_per_client", "rpc_rate",
		), map[string]*keyNode{
			"kv_max_value_size": honoured(),
			"txn_max_req_len":   honoured(),
		})),

		// Connect.
		"connect": object(map[string]*keyNode{
			"enabled":     honoured(),
			"ca_provider": honoured(),
			// ca_config keys depend on the provider: the ones the built-in CA
			// uses are honoured, any other is reported as ignored.
			"ca_config": {status: keyHonoured, open: true, openStatus: keyIgnored, children: map[string]*keyNode{
				"cluster_id":    honoured(),
				"leaf_cert_ttl": honoured(),
				"root_cert_ttl": honoured(),
			}},
			"enable_mesh_gateway_wan_federation": ignored(),
			"test_ca_leaf_root_change_spread":    ignored(),
		}),

		// Service and check definitions: their content is checked when
		// the agent registers them, as the HTTP API checks it.
		"service":  honoured(),
		"services": honoured(),
		"watches":  honoured(),
		"check":    honoured(),
		"checks":   honoured(),

		// The agent command's process ID file.
		"pid_file": honoured(),

		// Logging.
		"log_level":            honoured(),
		"log_json":             honoured(),
		"log_sublevels":        ignored(),
		"log_file":             ignored(),
		"log_rotate_duration":  ignored(),
		"log_rotate_bytes":     ignored(),
		"log_rotate_max_files": ignored(),
		"enable_syslog":        ignored(),
		"syslog_facility":      ignored(),

		// /debug/pprof and script checks (agent/checks).
		"enable_debug":               honoured(),
		"enable_script_checks":       honoured(),
		"enable_local_script_checks": honoured(),

		// Things Trellis never does, so disabling them is already true.
		"disable_update_check":        honoured(),
		"disable_anonymous_signature": noop(),
		"disable_remote_exec":         noop(),

		// Gossip encryption (gossip/keyring.go).
		"encrypt":                 honoured(),
		"encrypt_verify_incoming": honoured(),
		"encrypt_verify_outgoing": honoured(),
		"disable_keyring_file":    honoured(),

		// Consul's non-user-configurable values: Consul overwrites whatever a
		// file says (sdk/testutil writes "version"), so ignoring them is exact.
		"version": noop(), "version_prerelease": noop(), "version_metadata": noop(),
		"revision": noop(), "build_date": noop(),
		"segment_limit": noop(), "segment_name_limit": noop(),
		"sync_coordinate_rate_target": noop(),
		// Consul's too, but read: tests shorten the coordinate reports.
		"sync_coordinate_interval_min": honoured(),
		"license_poll_base_time":       noop(), "license_poll_max_time": noop(),
		"license_update_base_time": noop(), "license_update_max_time": noop(),

		"acl": object(with(ignoredAll(
			// Consul's managed-service-provider hooks (HCP).
			"msp_disable_bootstrap",
		), map[string]*keyNode{
			// Read and handed to the servers and the agent (acl.go).
			"enabled":        honoured(),
			"default_policy": honoured(), "down_policy": honoured(),
			"enable_token_persistence": honoured(), "enable_token_replication": honoured(),
			"enable_key_list_policy": honoured(),
			"token_ttl":              honoured(), "policy_ttl": honoured(), "role_ttl": honoured(),
			"tokens": object(with(ignoredAll("managed_service_provider"), map[string]*keyNode{
				"initial_management": honoured(), "agent": honoured(), "agent_recovery": honoured(),
				"default": honoured(), "replication": honoured(),
				"config_file_service_registration": honoured(),
				"master":                           honoured(), "agent_master": honoured(),
			})),
		})),
		"autopilot": object(with(ignoredAll(
			// Consul Enterprise's.
			"disable_upgrade_migration", "redundancy_zone_tag", "upgrade_version_tag",
		), map[string]*keyNode{
			"cleanup_dead_servers": honoured(), "last_contact_threshold": honoured(), "max_trailing_logs": honoured(),
			"min_quorum": honoured(), "server_stabilization_time": honoured(),
		})),
		"cache":          object(ignoredAll("entry_fetch_max_burst", "entry_fetch_rate")),
		"config_entries": object(ignoredAll("bootstrap")),
		"auto_encrypt":   object(map[string]*keyNode{"tls": honoured(), "allow_tls": honoured(), "dns_san": honoured(), "ip_san": honoured()}),
		"auto_config":    refusedBlock("auto_config (TLS and gossip keys from the servers)"),
		"tls":            tlsKeys(),
		"http_config": object(with(ignoredAll(
			"response_headers", "use_cache", "max_header_bytes",
		), refusedAll("HTTP endpoint restrictions", "block_endpoints", "allow_write_http_from"))),
		"peering": object(ignoredAll("enabled", "test_allow_peer_registrations")),
		"xds":     object(map[string]*keyNode{"update_max_per_second": honoured()}),
		"rpc":     object(ignoredAll("enable_streaming")),

		// The DNS interface (agent/dns).
		"domain":     honoured(),
		"alt_domain": honoured(),
		"recursors":  honoured(),
		"dns_config": object(with(ignoredAll(
			// Trellis's DNS reads through the RPC without an agent cache;
			// namespaces are Enterprise.
			"use_cache", "cache_max_age", "prefer_namespace",
		), map[string]*keyNode{
			"allow_stale": honoured(), "max_stale": honoured(),
			"node_ttl": honoured(), "service_ttl": honoured(),
			"only_passing": honoured(), "enable_truncate": honoured(),
			"udp_answer_limit": honoured(), "a_record_limit": honoured(),
			"enable_additional_node_meta_txt": honoured(), "disable_compression": honoured(),
			"recursor_strategy": honoured(), "recursor_timeout": honoured(),
			"soa": object(map[string]*keyNode{
				"refresh": honoured(), "retry": honoured(), "expire": honoured(), "min_ttl": honoured(),
			}),
		})),
	}

	// Every other Consul key: accepted, not implemented.
	with(top, ignoredAll(
		"advertise_addr_ipv4", "advertise_addr_ipv6", "advertise_addr_wan",
		"advertise_addr_wan_ipv4", "advertise_addr_wan_ipv6", "advertise_reconnect_timeout",
		"check_output_max_size", "cloud",
		"default_query_time", "max_query_time",
		"disable_coordinates", "disable_host_node_id", "disable_http_unprintable_char_filter",
		"discard_check_output", "discovery_max_stale",
		"enable_agent_tls_for_checks", "enable_central_service_config",
		"gossip_lan", "gossip_wan", "license_path",
		"primary_datacenter", "primary_gateways", "primary_gateways_interval",
		"protocol", "raft_protocol", "raft_snapshot_threshold", "raft_snapshot_interval",
		"raft_trailing_logs", "reconnect_timeout_wan", "rejoin_after_leave", "auto_reload_config",
		"retry_interval_wan", "retry_max_wan", "retry_join_wan",
		"serf_wan", "server_name",
		"tagged_addresses", "telemetry", "translate_wan_addrs",
		"ui", "ui_content_path", "ui_dir", "ui_config", "unix_sockets",
		"raft_logstore", "use_streaming_backend", "snapshot_agent",
		"check_deregister_interval_min", "check_reap_interval", "consul",
		"audit", "read_replica", "non_voting_server", "segment", "segments", "partition",
		"reporting",
		// Deprecated top-level keys (upstream deprecated.go).
		"tls_prefer_server_cipher_suites",
		"start_join_wan", "raft_boltdb",
	))

	// Settings that ask for protection Trellis does not provide yet: refused
	// when they ask for it, so that a production config never runs open.
	with(top, refusedAll("gossip address restrictions", "serf_lan_allowed_cidrs", "serf_wan_allowed_cidrs"))
	// The deprecated top-level ACL keys, folded into the acl block.
	for _, k := range []string{
		"acl_agent_master_token", "acl_agent_token", "acl_token", "acl_enable_key_list_policy",
		"acl_master_token", "acl_replication_token", "enable_acl_replication",
		"acl_default_policy", "acl_down_policy", "acl_ttl",
	} {
		top[k] = honoured()
	}
	// Legacy ACLs were switched on by naming the ACL datacenter; Consul
	// still reads it as acl.enabled (and primary_datacenter).
	top["acl_datacenter"] = honoured()
	// The deprecated top-level forms of the tls block.
	for _, k := range []string{
		"ca_file", "ca_path", "cert_file", "key_file", "tls_cipher_suites", "tls_min_version",
		"verify_incoming", "verify_incoming_https", "verify_incoming_rpc", "verify_outgoing",
		"verify_server_hostname",
	} {
		top[k] = honoured()
	}
	return object(top)
}

// tlsKeys is Consul's tls block: verify_server_hostname belongs to
// internal_rpc only, as in Consul.
func tlsKeys() *keyNode {
	common := func() map[string]*keyNode {
		return map[string]*keyNode{
			"ca_file": honoured(), "ca_path": honoured(), "cert_file": honoured(), "key_file": honoured(),
			"verify_incoming": honoured(), "tls_min_version": honoured(), "tls_cipher_suites": honoured(),
			// Go chooses the suite order itself.
			"tls_prefer_server_cipher_suites": ignored(),
		}
	}
	return object(map[string]*keyNode{
		"defaults":     object(with(common(), map[string]*keyNode{"verify_outgoing": honoured()})),
		"internal_rpc": object(with(common(), map[string]*keyNode{"verify_outgoing": honoured(), "verify_server_hostname": honoured()})),
		"https":        object(with(common(), map[string]*keyNode{"verify_outgoing": ignored()})),
		// use_auto_cert serves gRPC-TLS with the auto_encrypt certificate.
		"grpc": object(with(common(), map[string]*keyNode{"verify_outgoing": ignored(), "use_auto_cert": honoured()})),
	})
}

// keyReport is what walking one config file against consulKeys found.
type keyReport struct {
	ignored []string // dotted paths of ignored keys that carry a value
	invalid []string // dotted paths that are not Consul keys
	refused []refusal
}

// refusal is one key that asks for protection Trellis does not provide.
type refusal struct {
	path    string // dotted, lower case
	feature string
}

// classify walks a decoded JSON document against the key tree.
func classify(doc map[string]any) keyReport {
	var r keyReport
	walkKeys(consulKeys(), doc, "", &r)
	sort.Strings(r.ignored)
	sort.Strings(r.invalid)
	sort.Slice(r.refused, func(i, j int) bool { return r.refused[i].path < r.refused[j].path })
	return r
}

func walkKeys(node *keyNode, obj map[string]any, prefix string, r *keyReport) {
	for k, v := range obj {
		lk := strings.ToLower(k)
		path := lk
		if prefix != "" {
			path = prefix + "." + lk
		}
		child, ok := node.children[lk]
		if !ok {
			if !node.open {
				r.invalid = append(r.invalid, path)
				continue
			}
			child = &keyNode{status: node.openStatus}
			if node.openStatus == keyRefused {
				// Inside a refused block every key, at any depth, asks
				// for the block's protection.
				child.open, child.openStatus, child.feature = true, keyRefused, node.feature
			}
		}
		if isEmptyValue(v) {
			// Nothing is lost by ignoring an absent value: sdk/testutil
			// writes "segments": null and "acl": {"tokens": {}}.
			continue
		}
		if child.children != nil || child.open {
			if sub, ok := v.(map[string]any); ok {
				walkKeys(child, sub, path, r)
				continue
			}
			// A scalar where an object belongs: the typed decode of an
			// honoured block reports it; a wholly ignored block is named.
		}
		switch child.status {
		case keyIgnored:
			r.ignored = append(r.ignored, path)
		case keyRefused:
			if asksForProtection(v) {
				r.refused = append(r.refused, refusal{path: path, feature: child.feature})
			}
		}
	}
}

// asksForProtection reports whether a refused key's value switches the
// protection on or tunes it, rather than leaving it off: true, a non-empty
// string or list, a non-zero number. false and 0 only relax.
func asksForProtection(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case json.Number:
		return x.String() != "0"
	}
	return !isEmptyValue(v)
}

// isEmptyValue reports whether a decoded JSON value carries no setting.
func isEmptyValue(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case map[string]any:
		for _, e := range x {
			if !isEmptyValue(e) {
				return false
			}
		}
		return true
	case []any:
		return len(x) == 0
	}
	return false
}
