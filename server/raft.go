package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/internal/hclogbridge"
	"github.com/trellis-mesh/trellis/structs"
)

// raftStores are the log, stable and snapshot stores, on disk or in memory.
type raftStores struct {
	log    raft.LogStore
	stable raft.StableStore
	snap   raft.SnapshotStore
	bolt   *raftboltdb.BoltStore
}

func (r *raftStores) Close() error {
	if r.bolt != nil {
		return r.bolt.Close()
	}
	return nil
}

func (s *Server) openStores() (*raftStores, error) {
	if s.cfg.InMemory {
		mem := raft.NewInmemStore()
		return &raftStores{log: mem, stable: mem, snap: raft.NewInmemSnapshotStore()}, nil
	}
	dir := filepath.Join(s.cfg.DataDir, "raft")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server: create raft dir: %w", err)
	}
	bolt, logs, err := openRaftLog(filepath.Join(dir, "raft.db")) // raft_verify.go
	if err != nil {
		return nil, err
	}
	// FileSnapshotStore keeps its files under <dir>/snapshots.
	snaps, err := raft.NewFileSnapshotStoreWithLogger(dir, 2, hclogbridge.New(s.logger, "raft-snapshot"))
	if err != nil {
		_ = bolt.Close()
		return nil, fmt.Errorf("server: open snapshot store: %w", err)
	}
	if err := verifyNewestSnapshot(dir, snaps); err != nil {
		_ = bolt.Close()
		return nil, err
	}
	cached, err := raft.NewLogCache(512, logs)
	if err != nil {
		_ = bolt.Close()
		return nil, err
	}
	return &raftStores{log: cached, stable: bolt, snap: snaps, bolt: bolt}, nil
}

func (s *Server) raftConfig() *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(s.cfg.NodeID)
	c.Logger = hclogbridge.New(s.logger, "raft")
	m := time.Duration(s.cfg.RaftMultiplier)
	c.HeartbeatTimeout = 1000 * time.Millisecond * m
	c.ElectionTimeout = 1000 * time.Millisecond * m
	c.LeaderLeaseTimeout = 500 * time.Millisecond * m
	if s.cfg.DevTiming {
		c.HeartbeatTimeout = 50 * time.Millisecond
		c.ElectionTimeout = 50 * time.Millisecond
		c.LeaderLeaseTimeout = 25 * time.Millisecond
	}
	// The leader pulls every pending apply (up to MaxAppendEntries) into
	// one AppendEntries and one fsync, so concurrent writers share disk
	// flushes. BatchApplyCh stays off: with a buffered apply channel a
	// future enqueued just before shutdown is never answered and its
	// caller blocks forever; unbuffered, group commit works the same
	// (BenchmarkKVWrites: ~2,600-3,000 writes/s with 32 writers either way).
	c.BatchApplyCh = false
	c.MaxAppendEntries = 128
	c.SnapshotThreshold = 16384
	c.SnapshotInterval = 30 * time.Second
	c.TrailingLogs = 10240
	// Removal from the configuration must not kill the process: the agent
	// decides what happens next.
	c.ShutdownOnRemove = false
	c.NotifyCh = s.leaderNotify
	return c
}

func (s *Server) setupRaft() error {
	stores, err := s.openStores()
	if err != nil {
		return err
	}
	if s.cfg.WrapLogStore != nil {
		stores.log = s.cfg.WrapLogStore(stores.log)
	}
	stores.log = &failStopLog{LogStore: stores.log, failed: s.logWriteFailed} // failstop.go
	s.raftStore = stores
	s.transport = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &raftLayer{chanListener: s.mux.raft, advertise: s.cfg.Advertise, dial: secureDial(s.cfg.RaftDial, s.cfg.TLS)},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hclogbridge.New(s.logger, "raft-net"),
	})
	conf := s.raftConfig()
	hasState, err := raft.HasExistingState(stores.log, stores.stable, stores.snap)
	if err != nil {
		_ = stores.Close()
		return fmt.Errorf("server: read raft state: %w", err)
	}
	if s.cfg.Bootstrap && !hasState {
		err := raft.BootstrapCluster(conf, stores.log, stores.stable, stores.snap, s.transport, raft.Configuration{
			Servers: []raft.Server{{ID: conf.LocalID, Address: s.transport.LocalAddr()}},
		})
		if err != nil {
			_ = stores.Close()
			return fmt.Errorf("server: bootstrap: %w", err)
		}
	}
	r, err := raft.NewRaft(conf, s.fsm, stores.log, stores.stable, stores.snap, pipelinedTransport{s.transport}) // raft_pipeline.go
	if err != nil {
		_ = stores.Close()
		return fmt.Errorf("server: start raft: %w", err)
	}
	s.raft = r
	s.reads = newReadGate(func(timeout time.Duration) error { return r.Barrier(timeout).Error() }, r.CurrentTerm, conf.HeartbeatTimeout, systemClock{base: time.Now()})
	if hasState || s.cfg.Bootstrap {
		s.bootstrapped.Store(true)
	}
	return nil
}

// maybeBootstrap implements -bootstrap-expect: once the expected number of
// servers of our datacenter are alive in Serf, and none of them already has
// a Raft configuration, every one of them bootstraps with the same server
// set, so they agree without a coordinator.
func (s *Server) maybeBootstrap() {
	if s.bootstrapped.Load() || s.cfg.BootstrapExpect == 0 || s.cfg.Membership == nil {
		return
	}
	if f := s.raft.GetConfiguration(); f.Error() == nil && len(f.Configuration().Servers) > 0 {
		s.bootstrapped.Store(true)
		return
	}
	var servers []*gossip.ServerMeta
	for _, m := range s.cfg.Membership.Members() {
		meta, ok := gossip.ParseServer(m)
		if !ok || meta.Datacenter != s.cfg.Datacenter || m.Status != serf.StatusAlive {
			continue
		}
		if meta.Expect != 0 && meta.Expect != s.cfg.BootstrapExpect {
			s.logger.Error("servers disagree on bootstrap-expect; not bootstrapping", "member", meta.Name, "theirs", meta.Expect, "ours", s.cfg.BootstrapExpect)
			return
		}
		if meta.Bootstrap {
			s.logger.Error("a member was started with -bootstrap; not bootstrapping", "member", meta.Name)
			return
		}
		servers = append(servers, meta)
	}
	if len(servers) < s.cfg.BootstrapExpect {
		return
	}
	// If any peer already belongs to a cluster, we are joining one: its
	// leader will add us as a voter.
	for _, srv := range servers {
		if srv.ID == s.cfg.NodeID {
			continue
		}
		var peers []string
		ctx, cancel := context.WithTimeout(s.ctx, 2*time.Second)
		err := structs.MethodStatusPeers.Call(ctx, s.pool.at(srv.Addr), &structs.DCSpecificRequest{}, &peers)
		cancel()
		if err != nil {
			s.logger.Debug("bootstrap: cannot ask peer for its peers yet", "peer", srv.Name, "error", err)
			return
		}
		if len(peers) > 0 {
			s.logger.Info("bootstrap: found an existing cluster, waiting to be added", "peer", srv.Name)
			s.bootstrapped.Store(true)
			return
		}
	}
	var conf raft.Configuration
	for _, srv := range servers {
		conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(srv.ID), Address: raft.ServerAddress(srv.Addr)})
	}
	if err := s.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		s.logger.Error("bootstrap failed", "error", err)
		return
	}
	s.logger.Info("bootstrapped the cluster", "servers", len(conf.Servers))
	s.bootstrapped.Store(true)
}
