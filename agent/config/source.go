package config

import (
	"reflect"
)

// source is one layer of configuration: the defaults, the -dev overlay, one
// config file, or the command-line flags. Every field is a pointer, slice or
// map so that "not set" differs from a zero value; layers are merged in order
// with merge. The JSON names are Consul's; encoding/json matches them
// case-insensitively, as Consul's decoder does.
//
// Only keys Trellis honours have a field here; schema.go accounts for every
// other Consul key.
type source struct {
	NodeName        *string           `json:"node_name"`
	NodeID          *string           `json:"node_id"`
	NodeMeta        map[string]string `json:"node_meta"`
	Datacenter      *string           `json:"datacenter"`
	DataDir         *string           `json:"data_dir"`
	Server          *bool             `json:"server"`
	Bootstrap       *bool             `json:"bootstrap"`
	BootstrapExpect *int              `json:"bootstrap_expect"`

	BindAddr      *string         `json:"bind_addr"`
	AdvertiseAddr *string         `json:"advertise_addr"`
	ClientAddr    *string         `json:"client_addr"`
	SerfLANBind   *string         `json:"serf_lan"`
	Addresses     addressesSource `json:"addresses"`
	Ports         portsSource     `json:"ports"`

	RetryJoin            []string `json:"retry_join"`
	StartJoin            []string `json:"start_join"`
	RetryInterval        *string  `json:"retry_interval"`
	RetryMax             *int     `json:"retry_max"`
	LeaveOnTerminate     *bool    `json:"leave_on_terminate"`
	SkipLeaveOnInterrupt *bool    `json:"skip_leave_on_interrupt"`
	ReconnectTimeout     *string  `json:"reconnect_timeout"`

	SessionTTLMin *string `json:"session_ttl_min"`
	AEInterval    *string `json:"ae_interval"`
	// SyncCoordinateIntervalMin is Consul's non-user value; Trellis reads it
	// so that tests can make agents report coordinates sooner.
	SyncCoordinateIntervalMin *string           `json:"sync_coordinate_interval_min"`
	CheckUpdateInterval       *string           `json:"check_update_interval"`
	Performance               performanceSource `json:"performance"`
	Locality                  localitySource    `json:"locality"`
	Limits                    limitsSource      `json:"limits"`

	Domain    *string         `json:"domain"`
	AltDomain *string         `json:"alt_domain"`
	Recursors []string        `json:"recursors"`
	DNSConfig dnsConfigSource `json:"dns_config"`

	Connect connectSource `json:"connect"`
	TLS     tlsSource     `json:"tls"`
	// The deprecated top-level forms of the tls block (ca_file,
	// verify_incoming, ...), inline as Consul reads them.
	deprecatedTLSSource
	ACL aclSource `json:"acl"`
	// The deprecated top-level ACL keys (acl_master_token, ...), folded
	// into ACL per layer (acl.go).
	deprecatedACLSource
	XDS xdsSource `json:"xds"`
	// Autopilot is the autopilot block (autopilot.go).
	Autopilot autopilotSource `json:"autopilot"`
	// AutoEncrypt is the auto_encrypt block (auto_encrypt.go).
	AutoEncrypt autoEncryptSource `json:"auto_encrypt"`

	// Service and check definitions, in the order read; the agent
	// registers them (definitions.go).
	Service  definitions `json:"service"`
	Services definitions `json:"services"`
	Check    definitions `json:"check"`
	Checks   definitions `json:"checks"`

	// Watches are Consul's watch definitions, kept as written: their keys
	// belong to consul/api's watch package, which the agent parses them
	// with (agent/watches).
	Watches []map[string]any `json:"watches"`
	// Gossip encryption.
	Encrypt               *string `json:"encrypt"`
	EncryptVerifyIncoming *bool   `json:"encrypt_verify_incoming"`
	EncryptVerifyOutgoing *bool   `json:"encrypt_verify_outgoing"`
	DisableKeyringFile    *bool   `json:"disable_keyring_file"`

	LogLevel           *string `json:"log_level"`
	LogJSON            *bool   `json:"log_json"`
	DisableUpdateCheck *bool   `json:"disable_update_check"`
	PidFile            *string `json:"pid_file"`

	EnableDebug             *bool `json:"enable_debug"`
	EnableScriptChecks      *bool `json:"enable_script_checks"`
	EnableLocalScriptChecks *bool `json:"enable_local_script_checks"`
}

type addressesSource struct {
	HTTP    *string `json:"http"`
	GRPC    *string `json:"grpc"`
	DNS     *string `json:"dns"`
	HTTPS   *string `json:"https"`
	GRPCTLS *string `json:"grpc_tls"`
}

type portsSource struct {
	HTTP           *int `json:"http"`
	GRPC           *int `json:"grpc"`
	Server         *int `json:"server"`
	SerfLAN        *int `json:"serf_lan"`
	SidecarMinPort *int `json:"sidecar_min_port"`
	SidecarMaxPort *int `json:"sidecar_max_port"`
	DNS            *int `json:"dns"`
	HTTPS          *int `json:"https"`
	GRPCTLS        *int `json:"grpc_tls"`
	// SerfWAN is the servers' WAN pool.
	SerfWAN *int `json:"serf_wan"`
}

type localitySource struct {
	Region *string `json:"region"`
	Zone   *string `json:"zone"`
}

// dnsConfigSource is Consul's dns_config block.
type dnsConfigSource struct {
	AllowStale         *bool             `json:"allow_stale"`
	MaxStale           *string           `json:"max_stale"`
	NodeTTL            *string           `json:"node_ttl"`
	ServiceTTL         map[string]string `json:"service_ttl"`
	OnlyPassing        *bool             `json:"only_passing"`
	EnableTruncate     *bool             `json:"enable_truncate"`
	UDPAnswerLimit     *int              `json:"udp_answer_limit"`
	ARecordLimit       *int              `json:"a_record_limit"`
	NodeMetaTXT        *bool             `json:"enable_additional_node_meta_txt"`
	DisableCompression *bool             `json:"disable_compression"`
	RecursorStrategy   *string           `json:"recursor_strategy"`
	RecursorTimeout    *string           `json:"recursor_timeout"`
	SOA                dnsSOASource      `json:"soa"`
}

// dnsSOASource is dns_config.soa: the SOA record's timers, in seconds.
type dnsSOASource struct {
	Refresh *uint32 `json:"refresh"`
	Retry   *uint32 `json:"retry"`
	Expire  *uint32 `json:"expire"`
	MinTTL  *uint32 `json:"min_ttl"`
}

type performanceSource struct {
	RaftMultiplier *int    `json:"raft_multiplier"`
	RPCHoldTimeout *string `json:"rpc_hold_timeout"`
}

type limitsSource struct {
	KVMaxValueSize *uint64 `json:"kv_max_value_size"`
	TxnMaxReqLen   *uint64 `json:"txn_max_req_len"`
}

// xdsSource is Consul's xds block.
type xdsSource struct {
	UpdateMaxPerSecond *float64 `json:"update_max_per_second"`
}

type connectSource struct {
	Enabled    *bool          `json:"enabled"`
	CAProvider *string        `json:"ca_provider"`
	CAConfig   caConfigSource `json:"ca_config"`
}

type caConfigSource struct {
	ClusterID   *string `json:"cluster_id"`
	LeafCertTTL *string `json:"leaf_cert_ttl"`
	RootCertTTL *string `json:"root_cert_ttl"`
	// CSRMaxPerSecond and CSRMaxConcurrent seed the first CA
	// configuration's signing limits.
	CSRMaxPerSecond  *float64 `json:"csr_max_per_second"`
	CSRMaxConcurrent *int     `json:"csr_max_concurrent"`
}

// merge lays src over dst with Consul's rules: a set scalar replaces, slices
// are appended (retry_join from two files and a flag add up), maps are merged
// key by key, nested blocks are merged field by field.
func merge(dst *source, src *source) {
	mergeValue(reflect.ValueOf(dst).Elem(), reflect.ValueOf(src).Elem())
}

func mergeValue(dst, src reflect.Value) {
	for i := 0; i < src.NumField(); i++ {
		d, s := dst.Field(i), src.Field(i)
		switch s.Kind() {
		case reflect.Pointer:
			if !s.IsNil() {
				d.Set(s)
			}
		case reflect.Slice:
			if s.Len() > 0 {
				d.Set(reflect.AppendSlice(reflect.MakeSlice(s.Type(), 0, d.Len()+s.Len()), d))
				d.Set(reflect.AppendSlice(d, s))
			}
		case reflect.Map:
			if s.Len() > 0 {
				if d.IsNil() {
					d.Set(reflect.MakeMapWithSize(s.Type(), s.Len()))
				}
				iter := s.MapRange()
				for iter.Next() {
					d.SetMapIndex(iter.Key(), iter.Value())
				}
			}
		case reflect.Struct:
			mergeValue(d, s)
		default:
			// source holds only pointers, slices, maps and structs of them;
			// TestSourceFieldKinds keeps it that way.
			panic("config: unmergeable field " + src.Type().Field(i).Name)
		}
	}
}
