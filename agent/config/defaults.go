package config

// Consul's defaults (agent/config/default.go upstream) where Trellis follows
// them, and the few places it deliberately does not.
const (
	DefaultDatacenter       = "dc1"
	DefaultBindAddr         = "0.0.0.0"
	DefaultClientAddr       = "127.0.0.1"
	DefaultHTTPPort         = 8500
	DefaultGRPCPort         = 8502 // Consul: -1 outside -dev. Trellis always serves xDS.
	DefaultServerPort       = 8300
	DefaultSerfLANPort      = 8301
	DefaultSerfWANPort      = 8302
	DefaultDNSPort          = 8600
	DefaultSidecarMinPort   = 21000
	DefaultSidecarMaxPort   = 21255
	DefaultRetryInterval    = "30s"
	DefaultSessionTTLMin    = "10s"
	DefaultReconnectTimeout = "72h"
	DefaultAEInterval       = "1m"
	// DefaultSyncCoordinateIntervalMin is Consul's shortest interval
	// between two coordinate reports of an agent.
	DefaultSyncCoordinateIntervalMin = "15s"
	DefaultCheckUpdateInterval       = "5m"
	DefaultRaftMultiplier            = 5
	DefaultRPCHoldTimeout            = "7s"
	// DefaultXDSUpdateMaxPerSecond is Consul's xds.update_max_per_second.
	DefaultXDSUpdateMaxPerSecond = 250.0
	DefaultLogLevel              = "info"
	DefaultCAProvider            = "consul"
	DefaultLeafCertTTL           = "72h"
	DefaultRootCertTTL           = "87600h"
	// DefaultKVMaxValueSize is raft.SuggestedMaxDataSize, Consul's default.
	DefaultKVMaxValueSize = 512 * 1024
	DefaultTxnMaxReqLen   = 512 * 1024

	// The DNS interface's defaults (Consul's): answers from any server,
	// TTLs of 0, three records in a UDP answer, recursors tried in order.
	DefaultDomain           = "consul."
	DefaultDNSMaxStale      = "87600h"
	DefaultRecursorTimeout  = "2s"
	DefaultUDPAnswerLimit   = 3
	DefaultRecursorStrategy = "sequential"
	DefaultSOARefresh       = 3600
	DefaultSOARetry         = 600
	DefaultSOAExpire        = 86400

	// MinReconnectTimeout is Consul's floor for reconnect_timeout.
	MinReconnectTimeout = "8h"
)

func ptr[T any](v T) *T { return &v }

// defaultSource is the bottom layer. The node name (host name) is filled in
// by Load because it needs the host.
func defaultSource() *source {
	return &source{
		Datacenter:      ptr(DefaultDatacenter),
		Server:          ptr(false),
		Bootstrap:       ptr(false),
		BootstrapExpect: ptr(0),
		BindAddr:        ptr(DefaultBindAddr),
		ClientAddr:      ptr(DefaultClientAddr),
		Ports: portsSource{
			HTTP:           ptr(DefaultHTTPPort),
			GRPC:           ptr(DefaultGRPCPort),
			Server:         ptr(DefaultServerPort),
			SerfLAN:        ptr(DefaultSerfLANPort),
			SidecarMinPort: ptr(DefaultSidecarMinPort),
			SidecarMaxPort: ptr(DefaultSidecarMaxPort),
			DNS:            ptr(DefaultDNSPort),
			HTTPS:          ptr(-1),
			GRPCTLS:        ptr(-1),
			SerfWAN:        ptr(DefaultSerfWANPort),
		},
		RetryInterval: ptr(DefaultRetryInterval),
		RetryMax:      ptr(0),
		// LeaveOnTerminate and SkipLeaveOnInterrupt stay unset here: their
		// defaults depend on the role and are resolved in build.
		ReconnectTimeout:          ptr(DefaultReconnectTimeout),
		SessionTTLMin:             ptr(DefaultSessionTTLMin),
		AEInterval:                ptr(DefaultAEInterval),
		CheckUpdateInterval:       ptr(DefaultCheckUpdateInterval),
		SyncCoordinateIntervalMin: ptr(DefaultSyncCoordinateIntervalMin),
		Performance:               performanceSource{RaftMultiplier: ptr(DefaultRaftMultiplier), RPCHoldTimeout: ptr(DefaultRPCHoldTimeout)},
		XDS:                       xdsSource{UpdateMaxPerSecond: ptr(DefaultXDSUpdateMaxPerSecond)},
		Autopilot:                 defaultAutopilotSource(),
		ACL:                       defaultACLSource(),
		Limits: limitsSource{
			KVMaxValueSize: ptr(uint64(DefaultKVMaxValueSize)),
			TxnMaxReqLen:   ptr(uint64(DefaultTxnMaxReqLen)),
		},
		Connect: connectSource{
			// Consul defaults to false outside -dev; a mesh control plane
			// without the mesh would surprise, so Trellis enables it.
			Enabled:    ptr(true),
			CAProvider: ptr(DefaultCAProvider),
			CAConfig: caConfigSource{
				LeafCertTTL: ptr(DefaultLeafCertTTL),
				RootCertTTL: ptr(DefaultRootCertTTL),
			},
		},
		Domain: ptr(DefaultDomain),
		DNSConfig: dnsConfigSource{
			AllowStale:         ptr(true),
			MaxStale:           ptr(DefaultDNSMaxStale),
			NodeTTL:            ptr("0s"),
			OnlyPassing:        ptr(false),
			EnableTruncate:     ptr(false),
			UDPAnswerLimit:     ptr(DefaultUDPAnswerLimit),
			ARecordLimit:       ptr(0),
			NodeMetaTXT:        ptr(true),
			DisableCompression: ptr(false),
			RecursorStrategy:   ptr(DefaultRecursorStrategy),
			RecursorTimeout:    ptr(DefaultRecursorTimeout),
			SOA: dnsSOASource{
				Refresh: ptr(uint32(DefaultSOARefresh)),
				Retry:   ptr(uint32(DefaultSOARetry)),
				Expire:  ptr(uint32(DefaultSOAExpire)),
				MinTTL:  ptr(uint32(0)),
			},
		},
		LogLevel:           ptr(DefaultLogLevel),
		LogJSON:            ptr(false),
		DisableUpdateCheck: ptr(false),
		// Consul's: once encrypted, plaintext is refused both ways; the
		// rolling upgrade turns these off for its duration.
		EncryptVerifyIncoming: ptr(true),
		EncryptVerifyOutgoing: ptr(true),
		DisableKeyringFile:    ptr(false),

		EnableDebug:             ptr(false),
		EnableScriptChecks:      ptr(false),
		EnableLocalScriptChecks: ptr(false),
	}
}

// devSource is the -dev overlay (Consul's DevSource): laid over the
// defaults and under config files and flags, so either can still change it.
func devSource() *source {
	return &source{
		Server:    ptr(true),
		Bootstrap: ptr(true),
		// advertise_addr follows bind_addr, so -dev -bind X advertises X.
		BindAddr:    ptr("127.0.0.1"),
		ClientAddr:  ptr("127.0.0.1"),
		Performance: performanceSource{RaftMultiplier: ptr(1)},
		// No limit on snapshot deliveries in -dev: a developer wants every
		// change at once.
		XDS:                xdsSource{UpdateMaxPerSecond: ptr(0.0)},
		Connect:            connectSource{Enabled: ptr(true)},
		LogLevel:           ptr("debug"),
		DisableUpdateCheck: ptr(true),
		// As Consul's -dev: the /debug/pprof endpoints are served.
		EnableDebug: ptr(true),
	}
}
