package server

import (
	"context"
	"fmt"
	"net/url"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// AutoEncryptConfig is the servers' side of Consul's auto_encrypt.
type AutoEncryptConfig struct {
	// AllowTLS (auto_encrypt.allow_tls) answers AutoEncrypt.Sign; without
	// it the method fails with ErrAutoEncryptNotAllowed.
	AllowTLS bool
	// ManualCARoots gives the PEM certificates of the servers' own CA
	// (their tls CA files), which clients verify servers with; nil sends
	// none.
	ManualCARoots func() []string
	// VerifyServerHostname tells clients that servers' names are checked.
	VerifyServerHostname bool
}

// autoEncryptSign signs a client agent's certificate with the Connect CA.
// Trellis has no ACLs, so the caller proves no node identity the way
// Consul's node:write token does; what the servers can check is that the
// identity asked for is a client's and is not another node's: the node
// name must not belong, in the catalog or in gossip, to a node with
// another ID, nor be a server.
func (s *Server) autoEncryptSign(ctx context.Context, args *structs.AutoEncryptSignRequest, reply *structs.SignedResponse) error {
	if !s.cfg.AutoEncrypt.AllowTLS {
		return structs.ErrAutoEncryptNotAllowed
	}
	if args.Node == "" {
		return fmt.Errorf("%w: AutoEncrypt.Sign needs the agent's node name", ca.ErrInvalidCSR)
	}
	csr, err := ca.ParseCSR(args.CSR)
	if err != nil {
		return err
	}
	var agent *connect.SpiffeIDAgent
	signed, err := s.signCSR(ctx, csr, func(signing *connect.SpiffeIDSigning) (err error) {
		if agent, err = ca.ValidateAgentCSR(csr, signing, s.cfg.Datacenter); err != nil {
			return err
		}
		if err := s.checkAgentIdentity(args.Node, agent.Agent); err != nil {
			return err
		}
		// The certificate names the real trust domain whatever the CSR
		// wrote (the client's first CSR has the placeholder).
		csr.URIs = []*url.URL{agent.URI()}
		return nil
	})
	if err != nil {
		return err
	}
	roots, err := query.CARoots(nil, s.fsm.State())
	if err != nil {
		return err
	}
	issued := ca.IssuedAgentCert(signed.chain, signed.leaf, args.Node)
	issued.CreateIndex, issued.ModifyIndex = signed.index, signed.index
	*reply = structs.SignedResponse{
		IssuedCert:           *issued,
		ConnectCARoots:       *roots,
		VerifyServerHostname: s.cfg.AutoEncrypt.VerifyServerHostname,
	}
	if f := s.cfg.AutoEncrypt.ManualCARoots; f != nil {
		reply.ManualCARoots = f()
	}
	return nil
}

// checkAgentIdentity refuses a certificate for node under nodeID when the
// catalog or gossip knows node with another ID, or knows it as a server.
func (s *Server) checkAgentIdentity(node, nodeID string) error {
	_, n, err := s.fsm.State().GetNode(nil, node)
	if err != nil {
		return err
	}
	if n != nil && n.ID != "" && n.ID != nodeID {
		return fmt.Errorf("%w: node %q is registered with another node ID", structs.ErrPermissionDenied, node)
	}
	if s.cfg.Membership == nil {
		return nil
	}
	for _, m := range s.cfg.Membership.Members() {
		if m.Name != node {
			continue
		}
		if m.Tags[gossip.TagRole] == gossip.RoleServer {
			return fmt.Errorf("%w: node %q is a server; auto_encrypt certificates are for client agents", structs.ErrPermissionDenied, node)
		}
		if id := m.Tags[gossip.TagID]; id != "" && id != nodeID {
			return fmt.Errorf("%w: gossip member %q has another node ID", structs.ErrPermissionDenied, node)
		}
	}
	return nil
}
