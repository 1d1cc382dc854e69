package structs

import "time"

// The Connect CA types: the roots every proxy trusts, the CA configuration,
// the leaf certificates servers issue, and the Raft commands that change
// them. JSON field names follow Consul's agent/structs/connect_ca.go, since
// /v1/connect/ca/* and /v1/agent/connect/ca/* return these shapes.
//
// Some fields are hidden from JSON (json:"-") but must still travel through
// Raft and the internal RPC API; those carry an explicit codec tag, because
// the msgpack codec falls back to the json tag and would otherwise drop them.

// ConsulCAProvider is the name of the built-in CA provider, as Consul names
// it in the CA configuration.
const ConsulCAProvider = "consul"

// CARoot is one trusted root certificate. Exactly one root is Active: it
// signs new leaves. Inactive roots stay trusted (listed) after a rotation
// until no leaf they signed can still be valid.
type CARoot struct {
	// ID is the colon-hex SHA-1 fingerprint of the certificate (Consul's
	// CalculateCertFingerprint).
	ID string
	// Name is a human-friendly label ("Consul CA Root Cert").
	Name string
	// SerialNumber is the certificate's x509 serial.
	SerialNumber uint64
	// SigningKeyID is the colon-hex SubjectKeyId of the certificate that
	// signs leaves; leaves carry it as their AuthorityKeyId.
	SigningKeyID string
	// ExternalTrustDomain is the cluster ID the root was created under.
	ExternalTrustDomain string
	NotBefore           time.Time
	NotAfter            time.Time
	// RootCert is the PEM certificate.
	RootCert string
	// IntermediateCerts are PEM certificates appended to every leaf this
	// root signs: after a rotation, the new root cross-signed by the old
	// key, so that peers still trusting only the old root accept new
	// leaves.
	IntermediateCerts []string
	Active            bool
	// RotatedOutAt is when the root stopped being active; zero while
	// active. Not shown in JSON (as in Consul) but replicated.
	RotatedOutAt time.Time `json:"-" codec:"RotatedOutAt"`
	// PrivateKeyType ("ec" or "rsa") and PrivateKeyBits describe the
	// root's key.
	PrivateKeyType string
	PrivateKeyBits int
	RaftIndex
}

// CARoots is a list of roots.
type CARoots []*CARoot

// Active returns the active root, or nil.
func (rs CARoots) Active() *CARoot {
	for _, r := range rs {
		if r.Active {
			return r
		}
	}
	return nil
}

// IndexedCARoots is the roots list as /v1/connect/ca/roots returns it.
type IndexedCARoots struct {
	// ActiveRootID is the ID of the root that signs new leaves.
	ActiveRootID string
	// TrustDomain is "<cluster id>.consul": the host of every SPIFFE ID
	// the CA signs.
	TrustDomain string
	Roots       CARoots
	// QueryMeta becomes headers, not JSON; it still crosses the RPC API.
	QueryMeta `json:"-" codec:"QueryMeta"`
}

// CAConfiguration is the CA configuration: /v1/connect/ca/configuration.
type CAConfiguration struct {
	// ClusterID is the cluster's UUID; the trust domain is
	// "<ClusterID>.consul". Fixed at bootstrap, never shown in JSON and
	// never changed by a configuration update (as in Consul).
	ClusterID string `json:"-" codec:"ClusterID"`
	// Provider names the CA implementation; only "consul" (built in).
	Provider string
	// Config is the provider's configuration: LeafCertTTL, RootCertTTL,
	// IntermediateCertTTL, PrivateKeyType, PrivateKeyBits, PrivateKey,
	// RootCert, CSRMaxPerSecond, ... (see connect/ca.ParseConfig).
	Config map[string]interface{}
	// State is provider state; read-only for clients and unused by the
	// built-in CA, which keeps its keys in their own table.
	State map[string]string
	// ForceWithoutCrossSigning skips cross-signing on rotation.
	ForceWithoutCrossSigning bool
	RaftIndex
}

// CASigningKey is the private key of one root. It is replicated through
// Raft so that any server that becomes leader can sign, and it is never
// returned by any read endpoint: the state store keeps it in its own table
// and only the leader's signer reads it.
type CASigningKey struct {
	// RootID is the ID of the CARoot this key belongs to.
	RootID string
	// PrivateKey is the PEM-encoded key. Hidden from JSON so that it can
	// never leak through an HTTP encoder by accident.
	PrivateKey string `json:"-" codec:"PrivateKey"`
	RaftIndex
}

// CAOp is a CA Raft operation.
type CAOp string

// CA operations.
const (
	// CAOpSetConfig replaces the configuration only (a change that keeps
	// the active root, such as a new LeafCertTTL).
	CAOpSetConfig CAOp = "set-config"
	// CAOpSetRootsAndConfig replaces the roots list, their keys and the
	// configuration at once (bootstrap and rotation), provided the roots
	// table is still at Index (check-and-set).
	CAOpSetRootsAndConfig CAOp = "set-roots-config"
	// CAOpPruneRoots drops the listed inactive roots and their keys.
	CAOpPruneRoots CAOp = "prune-roots"
)

// CARequest is the ConnectCA Raft command, and the argument of
// ConnectCA.ConfigurationSet (which only reads Config).
type CARequest struct {
	Op CAOp
	// Index is the roots table index the leader read before building
	// Roots: set-roots-config fails (false) if the table moved since.
	Index uint64
	// Roots is the complete new roots list (set-roots-config) or the IDs
	// to remove (prune-roots, only ID is read).
	Roots CARoots
	// SigningKeys are the keys of roots in Roots not stored yet.
	SigningKeys []*CASigningKey
	Config      *CAConfiguration
	WriteRequest
}

// CALeafOp is a leaf-serial Raft operation.
type CALeafOp string

// CALeafOpReserveSerials reserves a block of certificate serial numbers.
const CALeafOpReserveSerials CALeafOp = "reserve-serials"

// CALeafRequest is the ConnectCALeaf Raft command: it advances the
// replicated serial counter by Count, so that every certificate any leader
// ever signs has a distinct serial.
type CALeafRequest struct {
	Op    CALeafOp
	Count uint64
	WriteRequest
}

// CASerialBlock is what a CALeafRequest returns: serials First up to
// First+Count-1 are the caller's, reserved at Raft index Index.
type CASerialBlock struct {
	First uint64
	Count uint64
	Index uint64
}

// CASignRequest asks a server to sign a leaf certificate for the service
// named in the CSR's SPIFFE URI.
type CASignRequest struct {
	// CSR is the PEM-encoded certificate signing request.
	CSR string
	WriteRequest
}

// IssuedCert is a signed leaf certificate: the reply of ConnectCA.Sign and
// the body of /v1/agent/connect/ca/leaf/<service>.
type IssuedCert struct {
	// SerialNumber is the colon-hex serial.
	SerialNumber string
	// CertPEM is the leaf followed by any intermediates of its root.
	// PrivateKeyPEM is filled in by the agent that made the key; servers
	// never see it.
	CertPEM       string `json:",omitempty"`
	PrivateKeyPEM string `json:",omitempty"`
	// Service and ServiceURI name the identity the leaf proves.
	Service    string `json:",omitempty"`
	ServiceURI string `json:",omitempty"`
	// Agent and AgentURI name the client agent an auto_encrypt
	// certificate proves (its node name and SPIFFE agent ID).
	Agent    string `json:",omitempty"`
	AgentURI string `json:",omitempty"`
	// ValidAfter and ValidBefore are the certificate's validity bounds.
	ValidAfter  time.Time
	ValidBefore time.Time
	RaftIndex
}
