package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"testing"
	"time"
)

// Sizes of the replication scenario (issue 2).
const (
	replKVWrites   = 500
	replServices   = 100
	replExtNodes   = 10
	replWriters    = 4
	replKVPrefix   = "scenario1/kv/"
	replServiceTag = "scenario1"
)

// serviceReg is one external node + service, written with
// PUT /v1/catalog/register.
type serviceReg struct {
	Node    string
	Address string
	ID      string
	Name    string
	Tags    []string
	Port    int
}

func (s serviceReg) body() []byte {
	b, _ := json.Marshal(map[string]any{
		"Node":    s.Node,
		"Address": s.Address,
		"Service": map[string]any{"ID": s.ID, "Service": s.Name, "Tags": s.Tags, "Port": s.Port},
	})
	return b
}

// replicationData is what the scenario writes and then expects on every
// server.
type replicationData struct {
	kv       map[string]string
	services []serviceReg
}

func newReplicationData() replicationData {
	d := replicationData{kv: map[string]string{}}
	for i := range replKVWrites {
		d.kv[fmt.Sprintf("%s%04d", replKVPrefix, i)] = fmt.Sprintf("value-%d-%s", i, time.Duration(i)*time.Millisecond)
	}
	for i := range replServices {
		n := i % replExtNodes
		d.services = append(d.services, serviceReg{
			Node:    fmt.Sprintf("scenario1-node-%02d", n),
			Address: fmt.Sprintf("10.20.0.%d", n+1),
			ID:      fmt.Sprintf("scenario1-svc-%03d", i),
			Name:    fmt.Sprintf("scenario1-svc-%03d", i),
			Tags:    []string{replServiceTag, fmt.Sprintf("n%d", n)},
			Port:    20000 + i,
		})
	}
	return d
}

// TestClusterReplication: a 3-server cluster agrees on its leader and its 3
// voters; 500 KV writes and 100 catalog registrations sent round-robin to
// all three servers from several goroutines are readable from each server
// in default and consistent mode, and in stale mode once its index has
// caught up with the leader's.
func TestClusterReplication(t *testing.T) {
	c, leader := startCluster(t, 3)
	ctx := scenarioContext(t)
	rc := newRawClient(t)
	servers := c.Servers()

	eventually(t, 10*time.Second, "cluster membership", func() error {
		return checkMembership(ctx, rc, c, leader)
	})

	data := newReplicationData()
	jobs := data.writeJobs(rc)
	// Job i goes to server i%3, so every server forwards writes to the
	// leader, from several goroutines at once.
	start := time.Now()
	err := runParallel(ctx, len(jobs), replWriters, func(ctx context.Context, i int) error {
		return jobs[i](ctx, servers[i%len(servers)].HTTPAddr())
	})
	if err != nil {
		t.Fatalf("writes to a healthy cluster failed: %v", err)
	}
	t.Logf("%d writes (%d KV, %d registrations) in %s", len(jobs), len(data.kv), len(data.services), time.Since(start).Round(time.Millisecond))

	for _, s := range servers {
		for _, mode := range []readMode{modeDefault, modeConsistent} {
			if err := verifyReplicated(ctx, rc, s.HTTPAddr(), mode, data); err != nil {
				t.Errorf("%s, %s reads: %v", s.Node(), mode, err)
			}
		}
	}

	// Stale reads come from each server's own store: wait until it has
	// applied the log as far as the leader's answers reached.
	_, kvIdx, _, err := rc.kvList(ctx, leader.HTTPAddr(), replKVPrefix, modeDefault)
	if err != nil {
		t.Fatal(err)
	}
	var svcs map[string][]string
	r, err := rc.getJSON(ctx, leader.HTTPAddr(), "/v1/catalog/services", &svcs)
	if err != nil {
		t.Fatal(err)
	}
	catIdx, err := r.consulIndex()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range servers {
		catchUp, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := errors.Join(
			rc.waitForIndex(catchUp, s.HTTPAddr(), kvPath(replKVPrefix, url.Values{"recurse": {""}}), kvIdx),
			rc.waitForIndex(catchUp, s.HTTPAddr(), "/v1/catalog/services", catIdx),
		)
		cancel()
		if err != nil {
			t.Errorf("%s did not catch up: %v", s.Node(), err)
			continue
		}
		if err := verifyReplicated(ctx, rc, s.HTTPAddr(), modeStale, data); err != nil {
			t.Errorf("%s, stale reads: %v", s.Node(), err)
		}
	}
}

// writeJob performs one write against the server at addr; nil means it was
// acknowledged (200 `true`).
type writeJob func(ctx context.Context, addr string) error

// writeJobs lists every write of the scenario, one registration after each
// five KV writes, so both kinds are in flight together.
func (d replicationData) writeJobs(rc *rawClient) []writeJob {
	var jobs []writeJob
	regs := d.services
	for i, k := range slices.Sorted(maps.Keys(d.kv)) {
		jobs = append(jobs, func(ctx context.Context, addr string) error {
			return rc.kvPut(ctx, addr, k, d.kv[k])
		})
		if i%5 == 4 && len(regs) > 0 {
			s := regs[0]
			regs = regs[1:]
			jobs = append(jobs, func(ctx context.Context, addr string) error {
				return rc.putTrue(ctx, addr, "/v1/catalog/register", s.body())
			})
		}
	}
	for _, s := range regs {
		jobs = append(jobs, func(ctx context.Context, addr string) error {
			return rc.putTrue(ctx, addr, "/v1/catalog/register", s.body())
		})
	}
	return jobs
}

// verifyReplicated reads everything the replication scenario wrote from
// addr in mode and compares it with data.
func verifyReplicated(ctx context.Context, rc *rawClient, addr string, mode readMode, data replicationData) error {
	var errs errorCollector

	got, _, r, err := rc.kvList(ctx, addr, replKVPrefix, mode)
	if err != nil {
		return err
	}
	errs.add(r.readHeadersError())
	if len(got) != len(data.kv) {
		errs.add(fmt.Errorf("recurse %s: %d keys, want %d", replKVPrefix, len(got), len(data.kv)))
	}
	for k, want := range data.kv {
		if v, ok := got[k]; !ok {
			errs.add(fmt.Errorf("key %s missing", k))
		} else if v != want {
			errs.add(fmt.Errorf("key %s = %q, want %q", k, v, want))
		}
	}
	// Single-key ?raw reads for a sample: the body is the bare value.
	i := 0
	for k, want := range data.kv {
		if i++; i%50 != 0 {
			continue
		}
		r, err := rc.do(ctx, "GET", addr, kvPath(k, mode.apply(url.Values{"raw": {""}})), nil)
		switch {
		case err != nil:
			errs.add(err)
		case r.Status != 200 || string(r.Body) != want:
			errs.add(fmt.Errorf("GET %s?raw: %d %q, want 200 %q", k, r.Status, r.Body, want))
		}
	}

	var services map[string][]string
	r, err = rc.getJSON(ctx, addr, "/v1/catalog/services"+query(mode, nil), &services)
	if err != nil {
		errs.add(err)
	} else {
		errs.add(r.readHeadersError())
	}
	for _, s := range data.services {
		if tags, ok := services[s.Name]; !ok {
			errs.add(fmt.Errorf("catalog/services lacks %s", s.Name))
		} else if !slices.Equal(tags, s.Tags) {
			errs.add(fmt.Errorf("catalog/services[%s] tags %v, want %v", s.Name, tags, s.Tags))
		}
		var inst []struct {
			Node        string
			Address     string
			ServiceID   string
			ServiceName string
			ServiceTags []string
			ServicePort int
		}
		if _, err := rc.getJSON(ctx, addr, "/v1/catalog/service/"+s.Name+query(mode, nil), &inst); err != nil {
			errs.add(err)
			continue
		}
		if len(inst) != 1 {
			errs.add(fmt.Errorf("catalog/service/%s: %d instances, want 1", s.Name, len(inst)))
			continue
		}
		g := inst[0]
		if g.Node != s.Node || g.Address != s.Address || g.ServiceID != s.ID || g.ServiceName != s.Name ||
			g.ServicePort != s.Port || !slices.Equal(g.ServiceTags, s.Tags) {
			errs.add(fmt.Errorf("catalog/service/%s = %+v, want %+v", s.Name, g, s))
		}
	}

	perNode := map[string][]string{}
	addrOf := map[string]string{}
	for _, s := range data.services {
		perNode[s.Node] = append(perNode[s.Node], s.ID)
		addrOf[s.Node] = s.Address
	}
	for node, ids := range perNode {
		var cn *struct {
			Node     struct{ Node, Address string }
			Services map[string]struct {
				ID      string
				Service string
				Port    int
			}
		}
		if _, err := rc.getJSON(ctx, addr, "/v1/catalog/node/"+node+query(mode, nil), &cn); err != nil {
			errs.add(err)
			continue
		}
		if cn == nil {
			errs.add(fmt.Errorf("catalog/node/%s is null", node))
			continue
		}
		if cn.Node.Node != node || cn.Node.Address != addrOf[node] {
			errs.add(fmt.Errorf("catalog/node/%s: node %+v, want address %s", node, cn.Node, addrOf[node]))
		}
		if len(cn.Services) != len(ids) {
			errs.add(fmt.Errorf("catalog/node/%s: %d services, want %d", node, len(cn.Services), len(ids)))
		}
		for _, id := range ids {
			if _, ok := cn.Services[id]; !ok {
				errs.add(fmt.Errorf("catalog/node/%s lacks service %s", node, id))
			}
		}
	}
	return errs.err()
}

// query renders a mode (and extra parameters) as a query string, "" when
// there is nothing to add.
func query(mode readMode, q url.Values) string {
	q = mode.apply(q)
	if len(q) == 0 {
		return ""
	}
	return "?" + encodeQuery(q)
}
