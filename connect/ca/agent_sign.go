package ca

import (
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/structs"
)

// AgentPlaceholderTrustDomain is the trust domain a client agent writes in
// its first auto_encrypt CSR, before it can know the cluster's: the
// servers sign the certificate for the real one (as Consul's agents and
// servers do with their placeholder).
const AgentPlaceholderTrustDomain = "dummy.trustdomain"

// ValidateAgentCSR checks an auto_encrypt request as ValidateLeafCSR checks
// a service's: a valid self-signature and exactly one URI SAN, here a
// SPIFFE agent ID of this trust domain (or the placeholder) and
// datacenter. It returns the agent identity in this trust domain, which is
// the URI the certificate must carry.
func ValidateAgentCSR(csr *x509.CertificateRequest, signing *connect.SpiffeIDSigning, dc string) (*connect.SpiffeIDAgent, error) {
	if err := csr.CheckSignature(); err != nil {
		return nil, csrErrorf("CSR signature is invalid: %v", err)
	}
	if len(csr.URIs) != 1 {
		return nil, csrErrorf("CSR SAN must contain exactly one SPIFFE ID, it has %d URIs", len(csr.URIs))
	}
	uri, err := connect.ParseCertURI(csr.URIs[0])
	if err != nil {
		return nil, csrErrorf("%v", err)
	}
	agent, ok := uri.(*connect.SpiffeIDAgent)
	if !ok {
		return nil, csrErrorf("SPIFFE ID in CSR must be an agent ID")
	}
	if strings.EqualFold(agent.Host, AgentPlaceholderTrustDomain) {
		agent = connect.NewAgentID(signing.Host(), agent.Datacenter, agent.Agent)
	}
	if !signing.CanSign(agent) {
		return nil, csrErrorf("SPIFFE ID in CSR from a different trust domain: %s, we are %s", agent.Host, signing.Host())
	}
	if agent.Datacenter != dc {
		return nil, csrErrorf("SPIFFE ID in CSR from a different datacenter: %s, we are %s", agent.Datacenter, dc)
	}
	return agent, nil
}

// IssuedAgentCert describes a signed auto_encrypt certificate of the
// agent node.
func IssuedAgentCert(chainPEM string, leaf *x509.Certificate, node string) *structs.IssuedCert {
	return &structs.IssuedCert{
		SerialNumber: connect.HexString(leaf.SerialNumber.Bytes()),
		CertPEM:      chainPEM,
		Agent:        node,
		AgentURI:     leaf.URIs[0].String(),
		ValidAfter:   leaf.NotBefore,
		ValidBefore:  leaf.NotAfter,
	}
}

// NewAgentCSR makes a fresh key and the CSR of a client agent's
// auto_encrypt certificate: the agent ID as its URI SAN, with the DNS and
// IP SANs the agent serves HTTPS under. The key never leaves the agent.
func NewAgentCSR(id *connect.SpiffeIDAgent, dnsNames []string, ips []net.IP) (csrPEM, keyPEM string, err error) {
	key, keyPEM, err := GenerateKey(LeafKeyType, LeafKeyBits)
	if err != nil {
		return "", "", err
	}
	tmpl := &x509.CertificateRequest{
		URIs:               []*url.URL{id.URI()},
		DNSNames:           dnsNames,
		IPAddresses:        ips,
		SignatureAlgorithm: sigAlgoForKey(key),
	}
	der, err := x509.CreateCertificateRequest(rand.Reader, tmpl, key)
	if err != nil {
		return "", "", fmt.Errorf("create CSR: %w", err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE REQUEST", Bytes: der})), keyPEM, nil
}
