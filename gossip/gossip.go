package gossip

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/serf/coordinate"
	"github.com/hashicorp/serf/serf"
)

// ErrNoneJoined is returned when not one of the join addresses answered.
var ErrNoneJoined = errors.New("gossip: no member could be joined")

// Config holds what an agent's Serf LAN member needs.
type Config struct {
	Logger   *slog.Logger
	NodeName string
	// BindAddr/BindPort is where memberlist listens (TCP and UDP);
	// AdvertiseAddr/AdvertisePort what others are told.
	BindAddr      string
	BindPort      int
	AdvertiseAddr string
	AdvertisePort int
	Tags          map[string]string
	// ReconnectTimeout is how long a failed member is kept before Serf
	// reaps it (default 72h).
	ReconnectTimeout time.Duration
	// SnapshotDir, when set, keeps Serf's member snapshot there so that a
	// restarted agent rejoins the members it knew.
	SnapshotDir string
	// OnEvent receives every Serf event, in order, from one goroutine.
	OnEvent func(serf.Event)
	// WAN makes this a member of the WAN pool, which only servers join:
	// memberlist's WAN timings, and its snapshot kept as remote.snapshot
	// (Consul's names) so that it never mixes with the LAN one.
	WAN bool
	// Encryption is the pool's gossip key and keyring file.
	Encryption Encryption
}

// Gossip is a running Serf LAN member and the goroutines it owns.
type Gossip struct {
	logger *slog.Logger
	serf   *serf.Serf
	events chan serf.Event
	// onEvent is Config.OnEvent, called by the goroutine Start runs.
	onEvent func(serf.Event)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New starts the Serf member (listening, not yet joined to anyone). Call
// Start to begin handling its events.
func New(cfg Config) (*Gossip, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReconnectTimeout <= 0 {
		cfg.ReconnectTimeout = 72 * time.Hour
	}
	ctx, cancel := context.WithCancel(context.Background())
	g := &Gossip{logger: cfg.Logger, events: make(chan serf.Event, 256), ctx: ctx, cancel: cancel}

	sc := serf.DefaultConfig()
	sc.NodeName = cfg.NodeName
	sc.Tags = cfg.Tags
	sc.EventCh = g.events
	sc.ReconnectTimeout = cfg.ReconnectTimeout
	sc.EnableNameConflictResolution = true
	sc.LeavePropagateDelay = time.Second
	// Network coordinates (Vivaldi, from the probes' round trips) feed
	// /v1/coordinate and ?near= sorting.
	sc.DisableCoordinates = false
	stdLog := log.New(&levelWriter{logger: cfg.Logger.With("component", "serf")}, "", 0)
	sc.Logger = stdLog
	mc := memberlist.DefaultLANConfig()
	snapshotName := "local.snapshot"
	if cfg.WAN {
		mc = memberlist.DefaultWANConfig()
		snapshotName = "remote.snapshot"
	}
	ring, keyIgnored, err := cfg.Encryption.keyring()
	if err != nil {
		cancel()
		return nil, err
	}
	if ring != nil {
		mc.Keyring = ring
		mc.GossipVerifyIncoming = !cfg.Encryption.AcceptPlaintext
		mc.GossipVerifyOutgoing = !cfg.Encryption.SendPlaintext
		// Serf rewrites the file after every install, use and remove.
		sc.KeyringFile = cfg.Encryption.KeyringFile
	}
	if keyIgnored {
		cfg.Logger.Warn("keyring doesn't include key provided with -encrypt, using keyring",
			"keyring", cfg.Encryption.KeyringFile)
	}
	mc.Name = cfg.NodeName
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertiseAddr = cfg.AdvertiseAddr
	mc.AdvertisePort = cfg.AdvertisePort
	mc.Logger = stdLog
	sc.MemberlistConfig = mc
	if cfg.SnapshotDir != "" {
		if err := os.MkdirAll(cfg.SnapshotDir, 0o700); err != nil {
			cancel()
			return nil, fmt.Errorf("gossip: snapshot dir: %w", err)
		}
		sc.SnapshotPath = filepath.Join(cfg.SnapshotDir, snapshotName)
	}
	s, err := serf.Create(sc)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("gossip: start serf: %w", err)
	}
	g.serf = s
	g.onEvent = cfg.OnEvent
	return g, nil
}

// Start delivers Serf events to Config.OnEvent from now on. Events that
// arrived since New wait in a buffer, so that the caller can publish the
// Gossip (for OnEvent to use) before the first one is handled.
func (g *Gossip) Start() {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for {
			select {
			case <-g.ctx.Done():
				return
			case ev := <-g.events:
				if g.onEvent != nil {
					g.onEvent(ev)
				}
			}
		}
	}()
}

// Members lists every member Serf knows, in any status.
func (g *Gossip) Members() []serf.Member { return g.serf.Members() }

// Stats is Serf's own statistics ("members", "health_score", ...), the
// serf_lan section of /v1/agent/self's Stats.
func (g *Gossip) Stats() map[string]string { return g.serf.Stats() }

// LocalMember is this agent's own member record.
func (g *Gossip) LocalMember() serf.Member { return g.serf.LocalMember() }

// Join contacts the given "host[:port]" addresses (defaultPort when a port
// is missing) and reports how many answered.
func (g *Gossip) Join(addrs []string, defaultPort int) (int, error) {
	full := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if _, _, err := net.SplitHostPort(a); err != nil {
			a = net.JoinHostPort(a, strconv.Itoa(defaultPort))
		}
		full = append(full, a)
	}
	n, err := g.serf.Join(full, true)
	if n == 0 {
		if err == nil {
			err = ErrNoneJoined
		}
		return 0, fmt.Errorf("%w: %v", ErrNoneJoined, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	return n, nil
}

// RetryJoin joins addrs in the background, retrying every interval until
// one answers (or max attempts, when max > 0). The goroutine is owned by
// the Gossip and stops with Shutdown.
func (g *Gossip) RetryJoin(addrs []string, defaultPort int, interval time.Duration, max int) {
	if len(addrs) == 0 {
		return
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		for attempt := 1; ; attempt++ {
			n, err := g.Join(addrs, defaultPort)
			if err == nil {
				g.logger.Info("joined the cluster", "contacted", n)
				return
			}
			if max > 0 && attempt >= max {
				g.logger.Error("giving up joining the cluster", "attempts", attempt, "error", err)
				return
			}
			g.logger.Warn("join failed, will retry", "error", err, "retry_in", interval)
			select {
			case <-g.ctx.Done():
				return
			case <-time.After(interval):
			}
		}
	}()
}

// UserEvent broadcasts a user event to every member (this one included),
// without coalescing. Serf refuses a name and payload over its size limit
// (512 bytes by default, as in Consul).
func (g *Gossip) UserEvent(name string, payload []byte) error {
	return g.serf.UserEvent(name, payload, false)
}

// Coordinate is this member's network coordinate.
func (g *Gossip) Coordinate() (*coordinate.Coordinate, error) { return g.serf.GetCoordinate() }

// CachedCoordinate is the latest coordinate heard from another member, if
// any.
func (g *Gossip) CachedCoordinate(node string) (*coordinate.Coordinate, bool) {
	return g.serf.GetCachedCoordinate(node)
}

// Leave tells the cluster this member is leaving on purpose.
func (g *Gossip) Leave() error { return g.serf.Leave() }

// ForceLeave marks a failed member as left so that it is removed at once;
// prune also drops it from the member list without waiting for the reap.
func (g *Gossip) ForceLeave(node string, prune bool) error {
	if prune {
		return g.serf.RemoveFailedNodePrune(node)
	}
	return g.serf.RemoveFailedNode(node)
}

// Shutdown stops Serf and every goroutine of this Gossip.
func (g *Gossip) Shutdown() error {
	err := g.serf.Shutdown()
	g.cancel()
	g.wg.Wait()
	return err
}

// levelWriter turns serf's and memberlist's "[LEVEL] text" log lines into
// slog records at the matching level.
type levelWriter struct{ logger *slog.Logger }

func (w *levelWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for prefix, l := range map[string]slog.Level{"[TRACE]": slog.LevelDebug - 4, "[DEBUG]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError, "[ERROR]": slog.LevelError} {
		if bytes.HasPrefix(line, []byte(prefix)) {
			level = l
			line = bytes.TrimSpace(line[len(prefix):])
			break
		}
	}
	w.logger.Log(context.Background(), level, string(line))
	return len(p), nil
}

// Holder hands the member list to components built before the Gossip
// exists (the server is created first, so that gossip events have somewhere
// to go); Members is empty until Set.
type Holder struct{ p atomic.Pointer[Gossip] }

// Set publishes g to readers.
func (h *Holder) Set(g *Gossip) { h.p.Store(g) }

// Members lists the members, or none before Set.
func (h *Holder) Members() []serf.Member {
	if g := h.p.Load(); g != nil {
		return g.Members()
	}
	return nil
}

// Join joins the members at addrs (see Gossip.Join), or fails with
// ErrNotStarted before Set.
func (h *Holder) Join(addrs []string, defaultPort int) (int, error) {
	if g := h.p.Load(); g != nil {
		return g.Join(addrs, defaultPort)
	}
	return 0, ErrNotStarted
}

// ErrNotStarted is returned by Holder reads before Set.
var ErrNotStarted = errors.New("gossip: not started")

// Coordinate is the member's own coordinate, or ErrNotStarted before Set.
func (h *Holder) Coordinate() (*coordinate.Coordinate, error) {
	if g := h.p.Load(); g != nil {
		return g.Coordinate()
	}
	return nil, ErrNotStarted
}

// KeyringOperation runs a keyring operation on the pool, or fails with
// ErrNotStarted before Set.
func (h *Holder) KeyringOperation(op KeyOp, key string, relayFactor uint8) (*serf.KeyResponse, error) {
	if g := h.p.Load(); g != nil {
		return g.KeyringOperation(op, key, relayFactor)
	}
	return nil, ErrNotStarted
}

// CachedCoordinate is another member's latest coordinate; none before Set.
func (h *Holder) CachedCoordinate(node string) (*coordinate.Coordinate, bool) {
	if g := h.p.Load(); g != nil {
		return g.CachedCoordinate(node)
	}
	return nil, false
}
