package server

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// Server health, as Consul's autopilot reports it: the leader asks every
// server in the Raft configuration for its Raft stats every
// serverHealthInterval and judges it against the autopilot configuration
// (operator_endpoint.go). A server is healthy while gossip sees it alive
// and, unless it leads, it heard from the leader within
// LastContactThreshold, in the leader's term, trailing the leader's log by
// at most MaxTrailingLogs entries. Trellis adds every live server as a
// voter at once (no stabilization wait before promotion) and does not
// remove failed servers itself (Serf's reap does), so
// ServerStabilizationTime, CleanupDeadServers, MinQuorum and the
// Enterprise settings are stored and shown but change nothing here; the
// view is for operators and monitoring.
const (
	serverHealthInterval = 2 * time.Second
	// raftStatsTimeout bounds one round of asking the servers, so that an
	// unreachable one cannot hold the view back.
	raftStatsTimeout = time.Second
)

// serverHealth is the leader's latest view.
type serverHealth struct {
	mu sync.Mutex
	// reply is the latest view, nil before the first of this leadership
	// (guarded by mu).
	reply *structs.OperatorHealthReply
}

func (h *serverHealth) latest() *structs.OperatorHealthReply {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.reply
}

func (h *serverHealth) set(r *structs.OperatorHealthReply) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reply = r
}

// statusRaftStats answers this server's own Raft stats.
func (s *Server) statusRaftStats(_ context.Context, _ *structs.DCSpecificRequest, reply *structs.RaftStats) error {
	*reply = raftStatsOf(s.raft.Stats())
	return nil
}

func raftStatsOf(stats map[string]string) structs.RaftStats {
	term, _ := strconv.ParseUint(stats["last_log_term"], 10, 64)
	index, _ := strconv.ParseUint(stats["last_log_index"], 10, 64)
	return structs.RaftStats{LastContact: stats["last_contact"], LastTerm: term, LastIndex: index}
}

// operatorServerHealth answers the leader's latest view, or a fresh one
// (not kept: the loop owns the view) when leadership just began.
func (s *Server) operatorServerHealth(ctx context.Context, _ *structs.DCSpecificRequest, reply *structs.OperatorHealthReply) error {
	latest := s.health.latest()
	if latest == nil {
		latest = s.computeServerHealth(ctx, nil)
	}
	*reply = *latest
	reply.Servers = slices.Clone(latest.Servers)
	return nil
}

// serverHealthLoop keeps the view fresh while ctx (this leadership) lasts,
// and forgets it at the end.
func (s *Server) serverHealthLoop(ctx context.Context) {
	defer s.health.set(nil)
	t := time.NewTicker(serverHealthInterval)
	defer t.Stop()
	for {
		s.health.set(s.computeServerHealth(ctx, s.health.latest()))
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// computeServerHealth computes the view. A server's StableSince carries
// over from prev while its health stays the same.
func (s *Server) computeServerHealth(ctx context.Context, prevReply *structs.OperatorHealthReply) *structs.OperatorHealthReply {
	reply := &structs.OperatorHealthReply{}
	f := s.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		s.logger.Warn("server health: cannot read the Raft configuration", "error", err)
		return reply
	}
	servers := f.Configuration().Servers
	members := map[string]serf.Member{} // by server ID
	if s.cfg.Membership != nil {
		for _, m := range s.cfg.Membership.Members() {
			if meta, ok := gossip.ParseServer(m); ok {
				members[meta.ID] = m
			}
		}
	}
	stats := s.collectRaftStats(ctx, servers)
	leaderAddr, _ := s.raft.LeaderWithID()
	self := stats[raft.ServerID(s.cfg.NodeID)]
	prev := map[string]structs.ServerHealth{}
	if prevReply != nil {
		for _, h := range prevReply.Servers {
			prev[h.ID] = h
		}
	}
	conf := s.autopilotConfig()
	now := time.Now()
	reply.Healthy = true
	voters, healthyVoters := 0, 0
	for _, srv := range servers {
		h := structs.ServerHealth{
			ID: string(srv.ID), Address: string(srv.Address), SerfStatus: "none",
			Leader: srv.Address == leaderAddr, Voter: srv.Suffrage == raft.Voter, LastContact: -1,
		}
		if m, ok := members[h.ID]; ok {
			h.Name, h.SerfStatus, h.Version = m.Name, m.Status.String(), m.Tags[gossip.TagBuild]
		}
		if st, ok := stats[srv.ID]; ok {
			h.LastContact, h.LastTerm, h.LastIndex = parseLastContact(st.LastContact), st.LastTerm, st.LastIndex
		}
		h.Healthy = isHealthy(h, self, conf)
		h.StableSince = now
		if p, ok := prev[h.ID]; ok && p.Healthy == h.Healthy {
			h.StableSince = p.StableSince
		}
		reply.Healthy = reply.Healthy && h.Healthy
		if h.Voter {
			voters++
			if h.Healthy {
				healthyVoters++
			}
		}
		reply.Servers = append(reply.Servers, h)
	}
	reply.FailureTolerance = max(0, healthyVoters-(voters/2+1))
	return reply
}

// collectRaftStats asks every server for its Raft stats at once (this
// server answers from its own), giving up on those that do not answer
// within raftStatsTimeout.
func (s *Server) collectRaftStats(ctx context.Context, servers []raft.Server) map[raft.ServerID]structs.RaftStats {
	ctx, cancel := context.WithTimeout(ctx, raftStatsTimeout)
	defer cancel()
	var (
		mu  sync.Mutex
		out = map[raft.ServerID]structs.RaftStats{raft.ServerID(s.cfg.NodeID): raftStatsOf(s.raft.Stats())}
		wg  sync.WaitGroup
	)
	for _, srv := range servers {
		if string(srv.ID) == s.cfg.NodeID {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var st structs.RaftStats
			if err := structs.MethodStatusRaftStats.Call(ctx, s.pool.at(string(srv.Address)), &structs.DCSpecificRequest{}, &st); err != nil {
				s.logger.Debug("server health: no Raft stats", "server", srv.Address, "error", err)
				return
			}
			mu.Lock()
			out[srv.ID] = st
			mu.Unlock()
		}()
	}
	wg.Wait()
	return out
}

// parseLastContact reads raft's last_contact stat: "0" on the leader,
// "never", or a duration; anything but a duration is negative (unknown).
func parseLastContact(v string) time.Duration {
	if v == "0" {
		return 0
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return -1
	}
	return d
}

// isHealthy judges one server against the leader's stats and the
// autopilot configuration.
func isHealthy(h structs.ServerHealth, leader structs.RaftStats, conf structs.AutopilotConfig) bool {
	switch {
	case h.SerfStatus != "alive":
		return false
	case h.Leader:
		return true
	case h.LastContact < 0 || h.LastContact > conf.LastContactThreshold:
		return false
	case h.LastTerm != leader.LastTerm:
		return false
	}
	return leader.LastIndex <= conf.MaxTrailingLogs || h.LastIndex >= leader.LastIndex-conf.MaxTrailingLogs
}
