package server

import (
	"context"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

const barrierTimeout = 2 * time.Minute

// monitorLeadership runs the leader loop while this server leads.
func (s *Server) monitorLeadership() {
	var running *leaderRun
	defer func() { running.stop(s) }()
	for {
		select {
		case <-s.ctx.Done():
			return
		case isLeader := <-s.leaderNotify:
			switch {
			case isLeader && running == nil:
				running = s.startLeaderLoop()
				s.logger.Info("cluster leadership acquired")
			case !isLeader && running != nil:
				running.stop(s)
				running = nil
				s.logger.Info("cluster leadership lost")
			}
		case done := <-s.reassertCh:
			if running != nil {
				running.stop(s)
				running = s.startLeaderLoop()
				s.logger.Info("cluster leadership reasserted")
			}
			close(done)
		}
	}
}

// leaderRun is one term's leader loop and what stops it.
type leaderRun struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func (s *Server) startLeaderLoop() *leaderRun {
	ctx, cancel := context.WithCancel(s.ctx)
	r := &leaderRun{cancel: cancel}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		s.leaderLoop(ctx)
	}()
	return r
}

func (r *leaderRun) stop(s *Server) {
	if r == nil {
		return
	}
	r.cancel()
	r.done.Wait()
	s.sessionTimers.stopAll()
}

// leaderLoop performs the leader's duties until ctx ends.
func (s *Server) leaderLoop(ctx context.Context) {
	// Wait until every entry of earlier terms is applied, so that what we
	// read from the store is the whole truth; until then the server
	// answers nothing but stale reads (readyToServe).
	for {
		term := s.raft.CurrentTerm()
		err := s.raft.Barrier(barrierTimeout).Error()
		if err == nil {
			// Before anything is served, so that no read finds the
			// configuration missing (operator_endpoint.go).
			err = s.initAutopilotConfig()
		}
		if err == nil && s.raft.CurrentTerm() == term {
			// The barrier committed in term, after every entry of the
			// terms before it, and the FSM has applied them all.
			s.readyTerm.Store(term)
			break
		}
		s.logger.Warn("leader barrier failed", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	aclsReady := make(chan struct{})
	defer s.startConnectCA(ctx, aclsReady)() // connect_ca_leader.go
	defer s.startACLs(ctx, aclsReady)()      // acl_leader.go
	var health sync.WaitGroup
	health.Add(2)
	go func() {
		defer health.Done()
		s.serverHealthLoop(ctx) // autopilot.go
	}()
	go func() {
		defer health.Done()
		s.reads.renewWhileUsed(ctx, s.readyTerm.Load()) // reads.go
	}()
	defer health.Wait()
	s.restoreSessionTimers()
	s.reconcileAll()

	reconcile := time.NewTicker(s.cfg.ReconcileInterval)
	defer reconcile.Stop()
	reap := time.NewTicker(s.cfg.TombstoneTTL)
	defer reap.Stop()
	// reapMark is the index every tombstone older than one TTL is below.
	reapMark := s.fsm.State().LastIndex()
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-s.reconcileCh:
			s.reconcileMember(m)
		case <-reconcile.C:
			s.reconcileAll()
		case <-reap.C:
			if reapMark > 0 {
				if _, err := s.raftApply(structs.TombstoneRequestType, &structs.TombstoneRequest{ReapIndex: reapMark}); err != nil {
					s.logger.Warn("tombstone reap failed", "error", err)
				}
			}
			reapMark = s.fsm.State().LastIndex()
		}
	}
}

// readyToServe returns the current term and whether this server, if it
// leads, has applied everything committed before its term.
func (s *Server) readyToServe() (uint64, bool) {
	term := s.raft.CurrentTerm()
	return term, s.readyTerm.Load() == term
}

// restoreSessionTimers arms a TTL timer for every session, as a new leader
// cannot know when each was last renewed.
func (s *Server) restoreSessionTimers() {
	_, sessions, err := s.fsm.State().SessionList(nil)
	if err != nil {
		s.logger.Error("cannot list sessions for TTL timers", "error", err)
		return
	}
	for _, sess := range sessions {
		if ttl, err := time.ParseDuration(sess.TTL); err == nil && ttl > 0 {
			s.sessionTimers.reset(sess.ID, ttl, s.expireSession)
		}
	}
}

// reconcileAll brings the catalog and Raft peers in line with every Serf
// member, and removes catalog nodes Serf has forgotten (reaped while no
// leader was watching).
func (s *Server) reconcileAll() {
	if s.cfg.Membership == nil {
		return
	}
	members := s.cfg.Membership.Members()
	known := make(map[string]bool, len(members))
	for _, m := range members {
		known[m.Name] = true
		s.reconcileMember(m)
	}
	_, checks, err := s.fsm.State().ChecksInState(nil, structs.HealthAny)
	if err != nil {
		return
	}
	for _, c := range checks {
		if c.CheckID == structs.SerfCheckID && !known[c.Node] {
			s.deregisterNode(c.Node)
		}
	}
}

func (s *Server) reconcileMember(m serf.Member) {
	if m.Tags[gossip.TagDC] != "" && m.Tags[gossip.TagDC] != s.cfg.Datacenter {
		return
	}
	switch m.Status {
	case serf.StatusAlive:
		s.handleAlive(m)
	case serf.StatusFailed:
		s.handleFailed(m)
	case serf.StatusLeft:
		s.handleLeft(m)
	}
}

func (s *Server) handleAlive(m serf.Member) {
	meta, isServer := gossip.ParseServer(m)
	if isServer {
		s.ensureRaftPeer(meta)
	}
	if s.nodeUpToDate(m, structs.HealthPassing, isServer) {
		return
	}
	req := s.memberRegistration(m, structs.HealthPassing, structs.SerfCheckAliveOutput)
	if isServer {
		port, _ := strconv.Atoi(m.Tags[gossip.TagPort])
		req.Service = &structs.NodeService{
			ID:      structs.ConsulServiceID,
			Service: structs.ConsulServiceName,
			Port:    port,
			Tags:    []string{},
			Meta:    map[string]string{},
			Weights: &structs.Weights{Passing: 1, Warning: 1},
		}
	}
	if _, err := s.raftApply(structs.RegisterRequestType, req); err != nil {
		s.logger.Warn("failed to register member in the catalog", "member", m.Name, "error", err)
	}
}

func (s *Server) handleFailed(m serf.Member) {
	if s.nodeUpToDate(m, structs.HealthCritical, false) {
		return
	}
	req := s.memberRegistration(m, structs.HealthCritical, structs.SerfCheckFailedOutput)
	if _, err := s.raftApply(structs.RegisterRequestType, req); err != nil {
		s.logger.Warn("failed to mark member failed in the catalog", "member", m.Name, "error", err)
	}
}

func (s *Server) handleLeft(m serf.Member) {
	if meta, ok := gossip.ParseServer(m); ok && meta.ID != s.cfg.NodeID {
		s.removeRaftPeer(meta)
	}
	if m.Name == s.cfg.NodeName {
		return
	}
	s.deregisterNode(m.Name)
}

func (s *Server) deregisterNode(node string) {
	if node == s.cfg.NodeName {
		return
	}
	_, n, err := s.fsm.State().GetNode(nil, node)
	if err != nil || n == nil {
		return
	}
	if _, err := s.raftApply(structs.DeregisterRequestType, &structs.DeregisterRequest{Node: node}); err != nil {
		s.logger.Warn("failed to deregister departed member", "member", node, "error", err)
		return
	}
	s.logger.Info("deregistered departed member", "member", node)
}

// memberRegistration is the catalog registration of a member: its node with
// the serfHealth check in the given status. SkipNodeUpdate is off so the
// node's address follows Serf's.
func (s *Server) memberRegistration(m serf.Member, status, output string) *structs.RegisterRequest {
	addr := m.Addr.String()
	req := &structs.RegisterRequest{
		ID:      m.Tags[gossip.TagID],
		Node:    m.Name,
		Address: addr,
		TaggedAddresses: map[string]string{
			"lan": addr, "lan_ipv4": addr, "wan": addr, "wan_ipv4": addr,
		},
		Check: &structs.HealthCheck{
			Node:    m.Name,
			CheckID: structs.SerfCheckID,
			Name:    structs.SerfCheckName,
			Status:  status,
			Output:  output,
			Type:    "",
		},
		WriteRequest: structs.WriteRequest{Datacenter: s.cfg.Datacenter},
	}
	// Keep what the agent's anti-entropy wrote for its node (meta, its own
	// tagged addresses): the leader only vouches for liveness and address.
	if _, n, err := s.fsm.State().GetNode(nil, m.Name); err == nil && n != nil {
		req.NodeMeta = n.Meta
		if n.Address == addr && len(n.TaggedAddresses) > 0 {
			req.TaggedAddresses = n.TaggedAddresses
		}
	}
	return req
}

// nodeUpToDate reports whether the catalog already shows the member at its
// address with serfHealth in the given status (and, for a server, its
// consul service), so that a reconcile writes nothing when nothing changed.
func (s *Server) nodeUpToDate(m serf.Member, status string, isServer bool) bool {
	st := s.fsm.State()
	_, n, err := st.GetNode(nil, m.Name)
	if err != nil || n == nil || n.Address != m.Addr.String() || (m.Tags[gossip.TagID] != "" && n.ID != m.Tags[gossip.TagID]) {
		return false
	}
	_, checks, err := st.NodeChecks(nil, m.Name)
	if err != nil {
		return false
	}
	ok := false
	for _, c := range checks {
		if c.CheckID == structs.SerfCheckID && c.Status == status {
			ok = true
		}
	}
	if !ok || !isServer {
		return ok
	}
	_, ns, err := st.NodeServices(nil, m.Name)
	if err != nil || ns == nil {
		return false
	}
	svc, found := ns.Services[structs.ConsulServiceID]
	return found && strconv.Itoa(svc.Port) == m.Tags[gossip.TagPort]
}

// ensureRaftPeer adds a live server as a voter, replacing a stale entry
// that has its address under another ID (a server that lost its data dir).
func (s *Server) ensureRaftPeer(meta *gossip.ServerMeta) {
	if meta.ID == "" || meta.Datacenter != s.cfg.Datacenter {
		return
	}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == meta.ID {
			if string(srv.Address) == meta.Addr {
				return
			}
			break
		}
		if string(srv.Address) == meta.Addr && string(srv.ID) != meta.ID {
			if err := s.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				s.logger.Warn("failed to remove stale raft peer", "id", srv.ID, "error", err)
				return
			}
		}
	}
	if _, _, err := net.SplitHostPort(meta.Addr); err != nil {
		return
	}
	if err := s.probePeerTLS(meta); err != nil {
		s.logger.Warn("not adding raft peer: it cannot be reached over verified TLS", "server", meta.Name, "addr", meta.Addr, "error", err)
		return
	}
	if err := s.raft.AddVoter(raft.ServerID(meta.ID), raft.ServerAddress(meta.Addr), 0, 0).Error(); err != nil {
		s.logger.Warn("failed to add raft peer", "server", meta.Name, "error", err)
		return
	}
	s.logger.Info("added raft peer", "server", meta.Name, "addr", meta.Addr)
}

func (s *Server) removeRaftPeer(meta *gossip.ServerMeta) {
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	for _, srv := range f.Configuration().Servers {
		if string(srv.ID) == meta.ID || string(srv.Address) == meta.Addr {
			if err := s.raft.RemoveServer(srv.ID, 0, 0).Error(); err != nil {
				s.logger.Warn("failed to remove raft peer", "server", meta.Name, "error", err)
				return
			}
			s.logger.Info("removed departed server from raft", "server", meta.Name)
		}
	}
}
