package query

import (
	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/discoverychain"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// CAConfigReader is the part of the state store the trust domain is read
// from: the CA configuration, which carries the cluster ID.
type CAConfigReader interface {
	CAConfig(ws memdb.WatchSet) (uint64, *structs.CAConfiguration, error)
}

// TrustDomain returns the mesh's trust domain, "<cluster id>.consul", and
// the index of the CA configuration it came from. Before the leader has
// bootstrapped the CA there is no cluster ID yet: the trust domain is then
// "" (discovery chains still compile; their SNIs end in ".internal." until
// the CA exists, and the watch added to ws fires when it does).
func TrustDomain(ws memdb.WatchSet, st CAConfigReader) (uint64, string, error) {
	idx, cfg, err := st.CAConfig(ws)
	if err != nil || cfg == nil || cfg.ClusterID == "" {
		return idx, "", err
	}
	return idx, connect.TrustDomain(cfg.ClusterID), nil
}

// CARoots lists the trusted roots with the active root's ID and the trust
// domain. Roots carry no key material: keys live in their own table.
func CARoots(ws memdb.WatchSet, st *state.Store) (*structs.IndexedCARoots, error) {
	_, cfg, err := st.CAConfig(ws)
	if err != nil {
		return nil, err
	}
	idx, roots, err := st.CARoots(ws)
	if err != nil {
		return nil, err
	}
	out := &structs.IndexedCARoots{Roots: roots}
	out.Index = idx
	if cfg != nil {
		out.TrustDomain = connect.TrustDomain(cfg.ClusterID)
	}
	if active := roots.Active(); active != nil {
		out.ActiveRootID = active.ID
	}
	return out, nil
}

// DiscoveryChain compiles the discovery chain of req.Name from the stored
// config entries, for req.EvaluateInDatacenter (localDC when empty) and
// with the request's overrides. It wakes when any entry the chain consults
// changes, and when the CA's trust domain appears.
func DiscoveryChain(ws memdb.WatchSet, st *state.Store, req *structs.DiscoveryChainRequest, localDC string) (*structs.DiscoveryChainResponse, error) {
	if req.Name == "" {
		return nil, ErrMissingName
	}
	dc := req.EvaluateInDatacenter
	if dc == "" {
		dc = localDC
	}
	caIdx, td, err := TrustDomain(ws, st)
	if err != nil {
		return nil, err
	}
	idx, chain, err := st.ServiceDiscoveryChain(ws, discoverychain.CompileRequest{
		ServiceName:            req.Name,
		EvaluateInDatacenter:   dc,
		EvaluateInTrustDomain:  td,
		OverrideMeshGateway:    req.OverrideMeshGateway,
		OverrideProtocol:       req.OverrideProtocol,
		OverrideConnectTimeout: req.OverrideConnectTimeout,
	})
	out := &structs.DiscoveryChainResponse{Chain: chain}
	out.Index = max(idx, caIdx)
	return out, err
}
