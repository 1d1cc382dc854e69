package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"google.golang.org/grpc"

	"github.com/trellis-mesh/trellis/proxycfg"
	"github.com/trellis-mesh/trellis/xds"
	"github.com/trellis-mesh/trellis/xds/gen"
)

// proxyWatcher is where the xDS server gets a proxy's snapshots: the local
// config source on a client agent, the catalog config source on a server.
type proxyWatcher interface {
	Watch(ctx context.Context, proxyServiceID, node, token string) (<-chan *proxycfg.ConfigSnapshot, error)
}

// xdsSource turns proxycfg snapshots into Envoy resources for the ADS
// server: one goroutine per stream, which ends (closing its channel) when
// the stream's context ends.
type xdsSource struct {
	watcher proxyWatcher
	logger  *slog.Logger
}

func (s *xdsSource) Watch(ctx context.Context, ref xds.ProxyRef) (<-chan xds.Resources, error) {
	snaps, err := s.watcher.Watch(ctx, ref.ServiceID, ref.Node, ref.Token)
	if err != nil {
		return nil, err
	}
	out := make(chan xds.Resources, 1)
	// One generator per stream rebuilds only what a snapshot changed.
	var g gen.Generator
	go func() {
		defer close(out)
		for {
			select {
			case <-ctx.Done():
				return
			case snap, ok := <-snaps:
				if !ok {
					return
				}
				res, err := g.Generate(snap)
				if err != nil {
					// Keep serving what the proxy has; the next snapshot may
					// generate cleanly.
					s.logger.Warn("cannot generate Envoy config", "proxy", ref.ServiceID, "error", err)
					continue
				}
				// Only the latest set matters: replace an undelivered one.
				select {
				case <-out:
				default:
				}
				out <- xds.Resources(res)
			}
		}
	}()
	return out, nil
}

// xdsServing is the agent's gRPC listener for Envoy.
type xdsServing struct {
	ads  *xds.Server
	grpc *grpc.Server
	wg   sync.WaitGroup
}

// startXDS serves ADS on every -grpc-port address (none when disabled).
func (a *Agent) startXDS(watcher proxyWatcher) error {
	addrs := a.rc.GRPCListenAddrs()
	if len(addrs) == 0 {
		return nil
	}
	ads, err := xds.New(xds.Config{
		Source:   &xdsSource{watcher: watcher, logger: a.logger},
		NodeName: a.rc.NodeName,
		Logger:   a.logger.With("component", "xds"),
	})
	if err != nil {
		return err
	}
	gs := grpc.NewServer()
	ads.Register(gs)
	x := &xdsServing{ads: ads, grpc: gs}
	for _, addr := range addrs {
		ln, err := listen(addr)
		if err != nil {
			x.stop()
			return fmt.Errorf("agent: bind gRPC %s: %w", addr, err)
		}
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			if err := gs.Serve(ln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				a.logger.Error("gRPC server stopped", "addr", addr, "error", err)
			}
		}()
	}
	a.xds = x
	return nil
}

// stop ends every ADS stream first (they never end on their own), then the
// gRPC server.
func (x *xdsServing) stop() {
	x.ads.Stop()
	x.grpc.GracefulStop()
	x.wg.Wait()
}

// ProxyStatus reports a proxy's xDS streams for /v1/agent/proxy-status.
func (a *Agent) ProxyStatus(proxyID string) any {
	if a.xds == nil {
		return []xds.StreamStatus{}
	}
	st := a.xds.ads.Status(proxyID)
	if st == nil {
		st = []xds.StreamStatus{}
	}
	return st
}
