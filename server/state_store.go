package server

import "github.com/trellis-mesh/trellis/state"

// StateStore returns the server's current state store, for readers in the
// same process that follow it with memdb WatchSets (the server-local
// proxycfg data sources and the catalog config source). It is read-only
// for them: every write goes through Raft. A snapshot restore replaces the
// store and closes the old one's AbandonCh, so callers must call
// StateStore again for each read rather than keep the result.
func (s *Server) StateStore() *state.Store { return s.fsm.State() }
