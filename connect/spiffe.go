// Package connect holds the mesh identities (SPIFFE IDs, the trust domain)
// shared by the CA, the agent's leaf manager, the proxy configuration and
// authorization. The certificate authority itself is in connect/ca.
package connect

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
)

// Identity formats are Consul's (agent/connect/uri*.go), because proxies and
// tools compare them byte for byte:
//
//	service:  spiffe://<trust domain>/ns/<namespace>/dc/<dc>/svc/<service>
//	agent:    spiffe://<trust domain>/agent/client/dc/<dc>/id/<node id>
//	signing:  spiffe://<trust domain>   (the URI SAN of every CA certificate)
//
// and the trust domain is "<cluster id>.consul".

// DefaultNamespace is the only namespace Trellis has, as in Consul CE.
const DefaultNamespace = "default"

// trustDomainSuffix is appended to the cluster ID to form the trust domain.
const trustDomainSuffix = "consul"

// ErrInvalidSpiffeID is returned for a URI that is not a SPIFFE ID of a
// shape Trellis knows.
var ErrInvalidSpiffeID = errors.New("SPIFFE ID is not in the expected format")

// TrustDomain returns the trust domain of a cluster: "<clusterID>.consul".
func TrustDomain(clusterID string) string { return clusterID + "." + trustDomainSuffix }

// HexString encodes bytes as lowercase hex pairs separated by colons, the
// form Consul uses for certificate serials, key IDs and root IDs.
func HexString(b []byte) string {
	const digits = "0123456789abcdef"
	if len(b) == 0 {
		return ""
	}
	out := make([]byte, 0, len(b)*3-1)
	for i, c := range b {
		if i > 0 {
			out = append(out, ':')
		}
		out = append(out, digits[c>>4], digits[c&0x0f])
	}
	return string(out)
}

// CertURI is a parsed identity from a certificate's URI SAN: a
// *SpiffeIDService, a *SpiffeIDAgent or a *SpiffeIDSigning.
type CertURI interface {
	// URI is the identity as it appears in a certificate.
	URI() *url.URL
}

// SpiffeIDService is a service's identity.
type SpiffeIDService struct {
	// Host is the trust domain.
	Host       string
	Partition  string
	Namespace  string
	Datacenter string
	Service    string
}

// NewServiceID returns the identity of service in datacenter dc of the
// cluster whose trust domain is trustDomain.
func NewServiceID(trustDomain, dc, service string) *SpiffeIDService {
	return &SpiffeIDService{Host: trustDomain, Namespace: DefaultNamespace, Datacenter: dc, Service: service}
}

// URI implements CertURI. A non-default partition is written as Consul
// Enterprise writes it ("/ap/<partition>" before the namespace).
func (id *SpiffeIDService) URI() *url.URL {
	ns := id.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	path := fmt.Sprintf("/ns/%s/dc/%s/svc/%s", ns, id.Datacenter, id.Service)
	if id.Partition != "" && id.Partition != "default" {
		path = "/ap/" + id.Partition + path
	}
	return &url.URL{Scheme: "spiffe", Host: id.Host, Path: path}
}

// String is the URI as text.
func (id *SpiffeIDService) String() string { return id.URI().String() }

// SpiffeIDSigning is the identity of a CA: its URI is spiffe://<trust
// domain> with no path.
type SpiffeIDSigning struct {
	ClusterID string
	Domain    string
}

// NewSigningID returns the CA identity of the cluster clusterID.
func NewSigningID(clusterID string) *SpiffeIDSigning {
	return &SpiffeIDSigning{ClusterID: clusterID, Domain: trustDomainSuffix}
}

// Host is the trust domain.
func (id *SpiffeIDSigning) Host() string { return id.ClusterID + "." + id.Domain }

// URI implements CertURI.
func (id *SpiffeIDSigning) URI() *url.URL { return &url.URL{Scheme: "spiffe", Host: id.Host()} }

// CanSign reports whether a CA with this identity may sign a certificate
// for id: only services and agents of its own trust domain (compared
// without case, as hosts are).
func (id *SpiffeIDSigning) CanSign(uri CertURI) bool {
	switch v := uri.(type) {
	case *SpiffeIDService:
		return strings.EqualFold(v.Host, id.Host())
	case *SpiffeIDAgent:
		return strings.EqualFold(v.Host, id.Host())
	}
	return false
}

// SpiffeIDAgent is a client agent's identity, the URI SAN of its
// auto_encrypt certificate:
// spiffe://<trust domain>/agent/client/dc/<dc>/id/<node id>.
type SpiffeIDAgent struct {
	// Host is the trust domain.
	Host       string
	Datacenter string
	// Agent is the node ID.
	Agent string
}

// NewAgentID returns the identity of the client agent with node ID
// nodeID in datacenter dc of the trust domain.
func NewAgentID(trustDomain, dc, nodeID string) *SpiffeIDAgent {
	return &SpiffeIDAgent{Host: trustDomain, Datacenter: dc, Agent: nodeID}
}

// URI implements CertURI.
func (id *SpiffeIDAgent) URI() *url.URL {
	return &url.URL{Scheme: "spiffe", Host: id.Host, Path: fmt.Sprintf("/agent/client/dc/%s/id/%s", id.Datacenter, id.Agent)}
}

var (
	spiffeIDServiceRegexp = regexp.MustCompile(`^(?:/ap/([^/]+))?/ns/([^/]+)/dc/([^/]+)/svc/([^/]+)$`)
	spiffeIDAgentRegexp   = regexp.MustCompile(`^/agent/client/dc/([^/]+)/id/([^/]+)$`)
)

// ParseCertURIFromString parses a SPIFFE ID given as text.
func ParseCertURIFromString(s string) (CertURI, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidSpiffeID, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	return ParseCertURI(u)
}

// ParseCertURI parses a certificate's URI SAN into a service or signing
// identity. Escaped path segments are unescaped.
func ParseCertURI(u *url.URL) (CertURI, error) {
	if u == nil {
		return nil, ErrInvalidSpiffeID
	}
	if u.Scheme != "spiffe" {
		return nil, fmt.Errorf("%w: SPIFFE ID must have 'spiffe' scheme", ErrInvalidSpiffeID)
	}
	// EscapedPath keeps "%2F" inside a segment from splitting it.
	if m := spiffeIDServiceRegexp.FindStringSubmatch(u.EscapedPath()); m != nil {
		parts := make([]string, 4)
		for i, raw := range m[1:] {
			v, err := url.PathUnescape(raw)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrInvalidSpiffeID, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
			}
			parts[i] = v
		}
		return &SpiffeIDService{Host: u.Host, Partition: parts[0], Namespace: parts[1], Datacenter: parts[2], Service: parts[3]}, nil
	}
	if m := spiffeIDAgentRegexp.FindStringSubmatch(u.Path); m != nil {
		return &SpiffeIDAgent{Host: u.Host, Datacenter: m[1], Agent: m[2]}, nil
	}
	if u.Path == "" {
		if i := strings.Index(u.Host, "."); i > 0 {
			return &SpiffeIDSigning{ClusterID: u.Host[:i], Domain: u.Host[i+1:]}, nil
		}
	}
	return nil, ErrInvalidSpiffeID
}
