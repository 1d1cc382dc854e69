package server

import (
	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// caConfigSource is the part of the state store the trust domain is read
// from: the CA configuration, which carries the cluster ID.
type caConfigSource interface {
	CAConfig(ws memdb.WatchSet) (uint64, *structs.CAConfiguration, error)
}

// trustDomainFrom returns the mesh's trust domain, "<cluster id>.consul",
// and the index of the CA configuration it came from. Before the leader
// has bootstrapped the CA there is no cluster ID yet: the trust domain is
// then "" (discovery chains still compile; their SNIs end in ".internal."
// until the CA exists, and the watch added to ws fires when it does).
func trustDomainFrom(st caConfigSource, ws memdb.WatchSet) (uint64, string, error) {
	return query.TrustDomain(ws, st)
}

// trustDomain is the current trust domain ("" before the CA exists).
func (s *Server) trustDomain() string {
	_, td, err := trustDomainFrom(s.fsm.State(), nil)
	if err != nil {
		s.logger.Warn("reading the trust domain failed", "error", err)
	}
	return td
}
