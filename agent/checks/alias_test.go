package checks

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// localState is a minimal agent local state for alias checks: services,
// checks, and the alias notifications the real one is expected to send.
type localState struct {
	mu       sync.Mutex
	services map[string]bool
	checks   map[string]*structs.HealthCheck
	aliases  map[string]map[string]chan<- struct{} // service ID -> check ID -> notify
}

func newLocalState() *localState {
	return &localState{
		services: map[string]bool{},
		checks:   map[string]*structs.HealthCheck{},
		aliases:  map[string]map[string]chan<- struct{}{},
	}
}

func (s *localState) AddAliasCheck(checkID, serviceID string, notify chan<- struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.aliases[serviceID] == nil {
		s.aliases[serviceID] = map[string]chan<- struct{}{}
	}
	s.aliases[serviceID][checkID] = notify
}

func (s *localState) RemoveAliasCheck(checkID, serviceID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.aliases[serviceID], checkID)
}

func (s *localState) ChecksForService(serviceID string) structs.HealthChecks {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(structs.HealthChecks, 0, len(s.checks))
	for _, c := range s.checks {
		if c.ServiceID != serviceID {
			continue
		}
		cp := *c
		out = append(out, &cp)
	}
	return out
}

func (s *localState) ServiceExists(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.services[id]
}

func (s *localState) aliasCount(serviceID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.aliases[serviceID])
}

// notifyLocked wakes the alias checks of serviceID ("" wakes all, as a
// node-level change may).
func (s *localState) notifyLocked(serviceID string) {
	for svc, m := range s.aliases {
		if serviceID != "" && svc != serviceID {
			continue
		}
		for _, ch := range m {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
	}
}

func (s *localState) setService(id string, present bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if present {
		s.services[id] = true
	} else {
		delete(s.services, id)
		for cid, c := range s.checks {
			if c.ServiceID == id {
				delete(s.checks, cid)
			}
		}
	}
	s.notifyLocked(id)
}

func (s *localState) setCheck(checkID, serviceID, status, output string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.checks[checkID] = &structs.HealthCheck{Node: "local", CheckID: checkID, Name: checkID + " name",
		ServiceID: serviceID, Status: status, Output: output}
	s.notifyLocked(serviceID)
}

// UpdateCheck makes localState the alias check's Notifier too, as the real
// local state is: the alias's own status lands among the checks.
func (s *localState) UpdateCheck(checkID, status, output string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.checks[checkID]; ok {
		c.Status, c.Output = status, output
		s.notifyLocked(c.ServiceID)
	}
}

// teeNotifier sends every update to all its notifiers.
type teeNotifier []Notifier

func (t teeNotifier) UpdateCheck(id, status, output string) {
	for _, n := range t {
		n.UpdateCheck(id, status, output)
	}
}

func TestAliasCheckLocalService(t *testing.T) {
	st := newLocalState()
	st.setService("web", true)
	st.setCheck("web-http", "web", structs.HealthPassing, "fine")
	st.setService("other", true)
	st.setCheck("other-check", "other", structs.HealthCritical, "not ours")
	// The alias check itself belongs to the sidecar, as Consul's default
	// sidecar checks do.
	st.setService("web-sidecar-proxy", true)
	st.setCheck("alias", "web-sidecar-proxy", structs.HealthCritical, "")

	rec := newRecorder()
	c := NewAliasCheck(AliasCheckConfig{CheckID: "alias", ServiceID: "web", Source: st,
		Notifier: teeNotifier{st, rec}})
	c.Start()
	defer func() {
		c.Stop()
		if n := st.aliasCount("web"); n != 0 {
			t.Errorf("%d alias registrations left after Stop", n)
		}
	}()

	steps := []struct {
		name       string
		action     func()
		wantStatus string
		wantOutput string
	}{
		{"passing service", func() {}, structs.HealthPassing, "All checks passing."},
		{"a warning", func() { st.setCheck("web-http", "web", structs.HealthWarning, "slow") },
			structs.HealthWarning, `Aliased check "web-http name" failing: slow`},
		{"critical beats warning", func() { st.setCheck("web-tcp", "web", structs.HealthCritical, "refused") },
			structs.HealthCritical, `Aliased check "web-tcp name" failing: refused`},
		{"recovered", func() {
			st.setCheck("web-tcp", "web", structs.HealthPassing, "")
			st.setCheck("web-http", "web", structs.HealthPassing, "")
		}, structs.HealthPassing, "All checks passing."},
		{"node-level check counts", func() { st.setCheck("_node_maintenance", "", structs.HealthCritical, "maint") },
			structs.HealthCritical, `Aliased check "_node_maintenance name" failing: maint`},
		{"node check cleared", func() { st.setCheck("_node_maintenance", "", structs.HealthPassing, "") },
			structs.HealthPassing, "All checks passing."},
		{"service gone", func() { st.setService("web", false) },
			structs.HealthCritical, "Service web could not be found on node "},
		{"service back without checks", func() { st.setService("web", true) },
			structs.HealthPassing, "All checks passing."}, // the passing node check
	}
	for _, s := range steps {
		s.action()
		u := rec.waitFor(t, "alias", s.name, func(u update) bool {
			return u.status == s.wantStatus && u.output == s.wantOutput
		})
		_ = u
	}
	if n := st.aliasCount("web"); n != 1 {
		t.Fatalf("alias registrations for web: %d, want 1", n)
	}
}

func TestAliasProcessChecks(t *testing.T) {
	chk := func(node, id, svc, status string) *structs.HealthCheck {
		return &structs.HealthCheck{Node: node, CheckID: id, Name: id, ServiceID: svc, Status: status, Output: "o"}
	}
	tests := []struct {
		name       string
		node, svc  string
		checks     structs.HealthChecks
		exists     bool
		wantStatus string
		wantOutput string
	}{
		{"no checks, service exists", "", "web", nil, true, structs.HealthPassing, "No checks found."},
		{"no checks, no service", "n1", "web", nil, false, structs.HealthCritical, "Service web could not be found on node n1"},
		{"other node ignored", "n1", "web", structs.HealthChecks{chk("n2", "x", "web", structs.HealthCritical), chk("n1", "a", "web", structs.HealthPassing)},
			false, structs.HealthPassing, "All checks passing."},
		{"critical first wins", "", "web", structs.HealthChecks{chk("n", "c", "web", structs.HealthCritical), chk("n", "w", "web", structs.HealthWarning)},
			true, structs.HealthCritical, `Aliased check "c" failing: o`},
		{"critical later wins", "", "web", structs.HealthChecks{chk("n", "w", "web", structs.HealthWarning), chk("n", "c", "web", structs.HealthCritical)},
			true, structs.HealthCritical, `Aliased check "c" failing: o`},
		{"passing after warning keeps warning", "", "web", structs.HealthChecks{chk("n", "w", "web", structs.HealthWarning), chk("n", "p", "web", structs.HealthPassing)},
			true, structs.HealthWarning, `Aliased check "w" failing: o`},
		{"node alias follows node checks", "n1", "", structs.HealthChecks{chk("n1", "serfHealth", "", structs.HealthPassing), chk("n1", "svc", "web", structs.HealthCritical)},
			false, structs.HealthPassing, "All checks passing."},
		{"node alias of a missing node", "n9", "", nil, false, structs.HealthCritical, "Service  could not be found on node n9"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := newRecorder()
			c := NewAliasCheck(AliasCheckConfig{CheckID: "alias", Node: tc.node, ServiceID: tc.svc, Notifier: rec})
			c.process(context.Background(), tc.checks, func(context.Context) bool { return tc.exists })
			got := rec.all("alias")
			if len(got) != 1 || got[0].status != tc.wantStatus || got[0].output != tc.wantOutput {
				t.Fatalf("got %+v, want %q %q", got, tc.wantStatus, tc.wantOutput)
			}
		})
	}
}

// catalogRPC answers Health.NodeChecks as blocking queries and
// Catalog.NodeServices from an in-memory catalog, like a server would.
type catalogRPC struct {
	mu       sync.Mutex
	index    uint64
	changed  chan struct{}
	checks   structs.HealthChecks
	services map[string]map[string]bool // node -> service IDs
	err      error
	calls    int
	blocked  int // queries currently blocking
}

func newCatalogRPC() *catalogRPC {
	return &catalogRPC{index: 10, changed: make(chan struct{}), services: map[string]map[string]bool{}}
}

func (c *catalogRPC) bump() {
	c.index++
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *catalogRPC) setCheck(node, id, svc, status string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, chk := range c.checks {
		if chk.Node == node && chk.CheckID == id {
			chk.Status = status
			c.bump()
			return
		}
	}
	c.checks = append(c.checks, &structs.HealthCheck{Node: node, CheckID: id, Name: id, ServiceID: svc, Status: status, Output: "out"})
	if svc != "" {
		if c.services[node] == nil {
			c.services[node] = map[string]bool{}
		}
		c.services[node][svc] = true
	}
	c.bump()
}

func (c *catalogRPC) setErr(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = err
	c.bump()
}

func (c *catalogRPC) stats() (calls, blocked int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls, c.blocked
}

func (c *catalogRPC) RPC(ctx context.Context, method string, args, reply any) error {
	req := args.(*structs.NodeSpecificRequest)
	c.mu.Lock()
	c.calls++
	if !req.AllowStale {
		c.mu.Unlock()
		return errors.New("alias queries should allow stale reads")
	}
	switch method {
	case structs.MethodCatalogNodeServices.Name():
		defer c.mu.Unlock()
		if c.err != nil {
			return c.err
		}
		out := reply.(*structs.IndexedNodeServices)
		out.Index = c.index
		if svcs, ok := c.services[req.Node]; ok {
			out.NodeServices = &structs.NodeServices{Node: &structs.Node{Node: req.Node}, Services: map[string]*structs.NodeService{}}
			for id := range svcs {
				out.NodeServices.Services[id] = &structs.NodeService{ID: id, Service: id}
			}
		}
		return nil
	case structs.MethodHealthNodeChecks.Name():
		for c.err == nil && req.MinQueryIndex >= c.index {
			ch := c.changed
			c.blocked++
			c.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
			}
			c.mu.Lock()
			c.blocked--
			if ctx.Err() != nil {
				c.mu.Unlock()
				return ctx.Err()
			}
		}
		defer c.mu.Unlock()
		if c.err != nil {
			return c.err
		}
		out := reply.(*structs.IndexedHealthChecks)
		out.Index = c.index
		for _, chk := range c.checks {
			if chk.Node == req.Node {
				cp := *chk
				out.HealthChecks = append(out.HealthChecks, &cp)
			}
		}
		return nil
	}
	c.mu.Unlock()
	return errors.New("unexpected method " + method)
}

func TestAliasCheckRemoteNode(t *testing.T) {
	cat := newCatalogRPC()
	cat.setCheck("n2", "serfHealth", "", structs.HealthPassing)
	cat.setCheck("n2", "api-check", "api", structs.HealthPassing)
	cat.setCheck("n3", "other", "api", structs.HealthCritical) // another node's instance

	rec := newRecorder()
	c := NewAliasCheck(AliasCheckConfig{CheckID: "alias", Node: "n2", ServiceID: "api", RPC: cat,
		Datacenter: "dc1", Notifier: rec})
	c.backoffUnit = time.Millisecond
	c.Start()
	stopped := false
	defer func() {
		if !stopped {
			c.Stop()
		}
	}()

	steps := []struct {
		name       string
		action     func()
		wantStatus string
		contains   string
	}{
		{"passing", func() {}, structs.HealthPassing, "All checks passing."},
		{"service check critical", func() { cat.setCheck("n2", "api-check", "api", structs.HealthCritical) },
			structs.HealthCritical, `Aliased check "api-check" failing`},
		{"recovered", func() { cat.setCheck("n2", "api-check", "api", structs.HealthPassing) },
			structs.HealthPassing, "All checks passing."},
		{"node failed", func() { cat.setCheck("n2", "serfHealth", "", structs.HealthCritical) },
			structs.HealthCritical, `Aliased check "serfHealth" failing`},
		{"node back", func() { cat.setCheck("n2", "serfHealth", "", structs.HealthPassing) },
			structs.HealthPassing, "All checks passing."},
		{"servers unreachable", func() { cat.setErr(errors.New("no servers")) },
			structs.HealthCritical, "Failure checking aliased node or service: no servers"},
		{"servers back", func() { cat.setErr(nil) },
			structs.HealthPassing, "All checks passing."},
	}
	for _, s := range steps {
		s.action()
		rec.waitFor(t, "alias", s.name, func(u update) bool {
			return u.status == s.wantStatus && strings.Contains(u.output, s.contains)
		})
	}

	// Between changes the check sits in one blocking query instead of
	// polling.
	waitUntil(t, "a blocking query", func() bool { _, b := cat.stats(); return b == 1 })
	before, _ := cat.stats()
	time.Sleep(100 * time.Millisecond)
	if after, _ := cat.stats(); after != before {
		t.Fatalf("%d RPCs while nothing changed", after-before)
	}

	// Stop cancels the blocking query.
	done := make(chan struct{})
	go func() { c.Stop(); close(done) }()
	select {
	case <-done:
		stopped = true
	case <-time.After(waitLimit):
		t.Fatal("Stop did not cancel the blocking query")
	}
	if _, b := cat.stats(); b != 0 {
		t.Fatalf("%d queries still blocked after Stop", b)
	}
}

func TestAliasCheckRemoteServiceMissing(t *testing.T) {
	cat := newCatalogRPC()
	cat.setCheck("n2", "serfHealth", "", structs.HealthPassing)
	rec := newRecorder()
	c := NewAliasCheck(AliasCheckConfig{CheckID: "alias", Node: "n2", ServiceID: "api", RPC: cat, Notifier: rec})
	c.Start()
	defer c.Stop()
	rec.waitFor(t, "alias", "service missing", func(u update) bool {
		return u.status == structs.HealthCritical && u.output == "Service api could not be found on node n2"
	})
	cat.setCheck("n2", "api-check", "api", structs.HealthPassing)
	rec.waitStatus(t, "alias", structs.HealthPassing)
}

// waitUntil polls cond (for states no notification announces).
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}
