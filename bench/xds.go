package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/consul/api"
)

// xdsUpstreamPort is the port of every backend sidecar instance.
const xdsUpstreamPort = 21000

// xdsQuiet is the pause before each change, longer than a proxy
// configuration's coalescing window (50 ms on Trellis), so that each
// change is measured alone rather than merged with the last one's tail.
const xdsQuiet = 150 * time.Millisecond

// xdsMesh names the services of one xds run.
type xdsMesh struct {
	prefix    string
	upstreams [][]int // per frontend, the backends it lists
}

func (m *xdsMesh) backend(k int) string        { return fmt.Sprintf("%s-backend-%d", m.prefix, k) }
func (m *xdsMesh) frontend(i int) string       { return fmt.Sprintf("%s-front-%d", m.prefix, i) }
func (m *xdsMesh) backendNode(k, j int) string { return fmt.Sprintf("%s-bnode-%d-%d", m.prefix, k, j) }
func (m *xdsMesh) changeNode(c int) string     { return fmt.Sprintf("%s-cnode-%d", m.prefix, c) }

// xds builds a mesh through the HTTP API (Backends services with two
// instances and their sidecars on nodes of their own, registered in the
// catalog; Frontends services with a sidecar of Upstreams upstreams each,
// registered with the agent), connects one simulated Envoy per frontend
// sidecar, measures the time to each one's first full config, then makes
// Changes endpoint changes (an instance of a random backend added, then
// removed) and measures for every affected stream the delay from the
// write's answer to the EDS update that shows the change.
func (r *runner) xds(ctx context.Context, res *Result) error {
	p := r.cfg.Params
	m := &xdsMesh{prefix: r.prefix}
	for range p.Frontends {
		m.upstreams = append(m.upstreams, r.rng.Perm(p.Backends)[:p.Upstreams])
	}
	defer r.xdsCleanup(m)
	if err := r.xdsRegister(ctx, m); err != nil {
		return err
	}

	proxies := make([]ProxySpec, p.Frontends)
	for i := range proxies {
		proxies[i] = ProxySpec{ID: m.frontend(i) + "-sidecar-proxy", Cluster: m.frontend(i), Upstreams: p.Upstreams}
	}
	before, withProc := r.proc()
	fleet := StartFleet(FleetConfig{Addr: r.cfg.Target.GRPCAddr, Token: r.cfg.Target.Token, Proxies: proxies, Logger: r.log})
	defer fleet.Close()
	if err := fleet.WaitReady(ctx, p.Wait); err != nil {
		return err
	}
	times, sizes, notReady := fleet.FirstConfig()
	first := Summarize(times)
	res.add("proxies", "proxies (ADS streams)", "", float64(p.Frontends))
	res.addDist("first_config", "first full config", first, false)
	res.add("first_config_missing", "streams without a full config", "", float64(notReady))
	reconnectsReady := fleet.Reconnects()
	var total int64
	for _, b := range sizes {
		total += b
	}
	if len(sizes) > 0 {
		res.add("first_config_kb", "first full config size (mean)", "KB", float64(total)/float64(len(sizes))/1024)
	}
	r.log.Info("first configs", "ready", len(times), "missing", notReady, "p99", first.P99)
	// Let the last ACKs land before the memory is read.
	time.Sleep(time.Second)
	connected, _ := r.proc()

	var delays []time.Duration
	missed := 0
	cpu0, _ := r.proc()
	msgs0, bytes0 := fleet.Traffic()
	for c := range p.Changes {
		x, err := r.xdsChange(ctx, m, fleet, c)
		if err != nil {
			return err
		}
		delays = append(delays, x.delays...)
		missed += x.missing
	}
	time.Sleep(xdsQuiet)
	msgs1, bytes1 := fleet.Traffic()
	cpu1, _ := r.proc()
	res.Propagation = append([]time.Duration(nil), delays...)
	prop := Summarize(delays)
	res.add("changes", "endpoint changes", "", float64(p.Changes))
	res.addDist("propagation", "propagation", prop, true)
	res.add("propagation_missed", "affected streams that missed a change", "", float64(missed))
	res.add("messages_per_change", "responses per change (all streams)", "", float64(msgs1-msgs0)/float64(p.Changes))
	res.add("kb_per_change", "bytes per change (all streams)", "KB", float64(bytes1-bytes0)/float64(p.Changes)/1024)
	res.add("reconnects_first", "stream reconnects until the first configs", "", float64(reconnectsReady))
	res.add("reconnects_changes", "stream reconnects during the changes", "", float64(fleet.Reconnects()-reconnectsReady))
	if withProc {
		res.add("rss_per_proxy_kb", "target RSS per connected proxy", "KB", float64(connected.RSS-before.RSS)/float64(p.Frontends)/1024)
		res.add("rss_mb", "target RSS, proxies connected", "MB", float64(connected.RSS)/(1<<20))
		res.add("cpu_per_change_ms", "target CPU per change", "ms", ms(cpu1.CPU-cpu0.CPU)/float64(p.Changes))
	}
	return nil
}

// changeResult is what one change measured.
type changeResult struct {
	delays  []time.Duration
	missing int
}

// xdsChange makes change c: even changes add an instance of a random
// backend on a node of their own, odd ones deregister the node the
// previous change added, so the endpoint sets keep their size.
func (r *runner) xdsChange(ctx context.Context, m *xdsMesh, fleet *Fleet, c int) (changeResult, error) {
	p := r.cfg.Params
	add := c%2 == 0
	var k int
	if add {
		k = r.rng.IntN(p.Backends)
	} else {
		k = r.lastChanged
	}
	r.lastChanged = k
	addr := fmt.Sprintf("10.50.%d.%d", c/2/250%250, c/2%250+1)
	affected := make([]bool, p.Frontends)
	for i, ups := range m.upstreams {
		for _, u := range ups {
			affected[i] = affected[i] || u == k
		}
	}
	x := NewExpect(Change{Addr: addr, Port: xdsUpstreamPort, Gone: !add, Prefix: m.backend(k) + "."}, affected)
	time.Sleep(xdsQuiet)
	fleet.Arm(x)
	defer fleet.Arm(nil)
	node := m.changeNode(c - c%2)
	var err error
	if add {
		err = r.registerSidecar(ctx, m.backend(k), node, addr)
	} else {
		_, err = r.client.Catalog().Deregister(&api.CatalogDeregistration{Node: node}, (&api.WriteOptions{}).WithContext(ctx))
	}
	if err != nil {
		return changeResult{}, fmt.Errorf("change %d: %w", c, err)
	}
	t1 := time.Now()
	select {
	case <-x.Done():
	case <-time.After(p.Wait):
	case <-ctx.Done():
		return changeResult{}, ctx.Err()
	}
	d, missing := x.Delays(t1)
	if missing > 0 {
		r.log.Warn("streams missed a change", "change", c, "missing", missing)
	}
	return changeResult{delays: d, missing: missing}, nil
}

// registerSidecar registers a Connect sidecar of service on node at addr
// in the catalog (what the Connect endpoints of service list).
func (r *runner) registerSidecar(ctx context.Context, service, node, addr string) error {
	_, err := r.client.Catalog().Register(&api.CatalogRegistration{
		Node:    node,
		Address: addr,
		Service: &api.AgentService{
			Kind:    api.ServiceKindConnectProxy,
			ID:      service + "-sidecar-proxy",
			Service: service + "-sidecar-proxy",
			Address: addr,
			Port:    xdsUpstreamPort,
			// consul/api sends zero weights unless told, and an instance
			// of weight 0 takes no traffic.
			Weights: api.AgentWeights{Passing: 1, Warning: 1},
			Proxy:   &api.AgentServiceConnectProxyConfig{DestinationServiceName: service, LocalServicePort: 8080},
		},
	}, (&api.WriteOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("register a sidecar of %s on %s: %w", service, node, err)
	}
	return nil
}

// xdsRegister registers the mesh: the backends' instances and sidecars
// in the catalog, the frontends and their sidecars with the agent.
func (r *runner) xdsRegister(ctx context.Context, m *xdsMesh) error {
	p := r.cfg.Params
	const workers = 8
	err := parallel(ctx, 2*p.Backends, workers, func(ctx context.Context, n int) error {
		k, j := n/2, n%2
		node, addr := m.backendNode(k, j), backendAddr(k, j)
		_, err := r.client.Catalog().Register(&api.CatalogRegistration{
			Node: node, Address: addr,
			Service: &api.AgentService{ID: m.backend(k), Service: m.backend(k), Address: addr, Port: 8080, Weights: api.AgentWeights{Passing: 1, Warning: 1}},
		}, (&api.WriteOptions{}).WithContext(ctx))
		if err != nil {
			return fmt.Errorf("register %s on %s: %w", m.backend(k), node, err)
		}
		return r.registerSidecar(ctx, m.backend(k), node, addr)
	})
	if err != nil {
		return err
	}
	return parallel(ctx, p.Frontends, workers, func(ctx context.Context, i int) error {
		var ups []api.Upstream
		for j, k := range m.upstreams[i] {
			ups = append(ups, api.Upstream{DestinationName: m.backend(k), LocalBindPort: 9000 + j})
		}
		reg := &api.AgentServiceRegistration{
			ID: m.frontend(i), Name: m.frontend(i), Port: 10000 + i%20000,
			Connect: &api.AgentServiceConnect{SidecarService: &api.AgentServiceRegistration{
				Port: 21000 + i%10000,
				// A TTL check instead of the default TCP and alias checks:
				// nothing listens on the sidecar's port, and check runners
				// would add their CPU to the target's figures.
				Checks: api.AgentServiceChecks{{Name: "bench", TTL: "24h", Status: api.HealthPassing}},
				Proxy:  &api.AgentServiceConnectProxyConfig{Upstreams: ups},
			}},
		}
		if err := r.client.Agent().ServiceRegisterOpts(reg, api.ServiceRegisterOpts{}.WithContext(ctx)); err != nil {
			return fmt.Errorf("register %s: %w", reg.Name, err)
		}
		return nil
	})
}

// backendAddr is the address of instance j of backend k: 10.40.0.0/14,
// two per backend, unique up to 2^17 backends.
func backendAddr(k, j int) string {
	n := 2*k + j + 1
	return fmt.Sprintf("10.%d.%d.%d", 40+n>>16, n>>8&0xff, n&0xff)
}

// xdsCleanup removes what xdsRegister and the changes registered, so that
// later runs on the same target measure the same catalog. A failure is
// logged: it leaves this run's names behind and nothing else.
func (r *runner) xdsCleanup(m *xdsMesh) {
	p := r.cfg.Params
	ctx := context.Background()
	_ = parallel(ctx, p.Frontends, 8, func(_ context.Context, i int) error {
		// Consul deregisters a sidecar with its service; Trellis too,
		// and a second call for the sidecar would find nothing.
		if err := r.client.Agent().ServiceDeregister(m.frontend(i)); err != nil {
			r.log.Warn("cannot deregister a service of the run", "service", m.frontend(i), "error", err)
		}
		return nil
	})
	var nodes []string
	for k := range p.Backends {
		nodes = append(nodes, m.backendNode(k, 0), m.backendNode(k, 1))
	}
	for c := 0; c < p.Changes; c += 2 {
		nodes = append(nodes, m.changeNode(c))
	}
	_ = parallel(ctx, len(nodes), 8, func(_ context.Context, i int) error {
		if _, err := r.client.Catalog().Deregister(&api.CatalogDeregistration{Node: nodes[i]}, nil); err != nil {
			r.log.Warn("cannot deregister a node of the run", "node", nodes[i], "error", err)
		}
		return nil
	})
}
