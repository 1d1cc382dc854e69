package httpapi

import (
	"net/http"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"

	"github.com/trellis-mesh/trellis/agent/cache"
	"github.com/trellis-mesh/trellis/server"
)

// TestConsulClientCached: the official client's UseCache reads of the
// endpoints Consul caches with background refresh miss once, then hit
// with an Age of 0 while the cache is current, and see a change through
// the background refresh; a read without ?cached reports no cache.
func TestConsulClientCached(t *testing.T) {
	c, _ := startRealServerWith(t, func(srv *server.Server, cfg *Config) {
		ac, err := cache.New(cache.Config{RPC: srv})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ac.Close)
		cfg.Cache = ac
	})
	reg := &api.CatalogRegistration{Node: "n1", Address: "10.0.0.1",
		Service: &api.AgentService{ID: "web", Service: "web", Port: 80}}
	if _, err := c.Catalog().Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		read func(q *api.QueryOptions) (*api.QueryMeta, int, error)
	}{
		{"catalog services", func(q *api.QueryOptions) (*api.QueryMeta, int, error) {
			out, m, err := c.Catalog().Services(q)
			return m, len(out), err
		}},
		{"catalog service", func(q *api.QueryOptions) (*api.QueryMeta, int, error) {
			out, m, err := c.Catalog().Service("web", "", q)
			return m, len(out), err
		}},
		{"health service", func(q *api.QueryOptions) (*api.QueryMeta, int, error) {
			out, m, err := c.Health().Service("web", "", false, q)
			return m, len(out), err
		}},
		{"connect ca roots", func(q *api.QueryOptions) (*api.QueryMeta, int, error) {
			out, m, err := c.Connect().CARoots(q)
			if out == nil {
				return m, 0, err
			}
			return m, len(out.Roots), err
		}},
	}
	for _, rd := range reads {
		t.Run(rd.name, func(t *testing.T) {
			m, _, err := rd.read(&api.QueryOptions{UseCache: true})
			if err != nil || m.CacheHit {
				t.Fatalf("first cached read: %+v %v, want a miss", m, err)
			}
			m, _, err = rd.read(&api.QueryOptions{UseCache: true, MaxAge: time.Minute})
			if err != nil || !m.CacheHit || m.CacheAge != 0 || m.LastIndex == 0 {
				t.Fatalf("second cached read: %+v %v, want a hit of age 0 with an index", m, err)
			}
			m, _, err = rd.read(nil)
			if err != nil || m.CacheHit {
				t.Fatalf("uncached read: %+v %v", m, err)
			}
		})
	}

	_, m, err := c.Catalog().Service("web", "", &api.QueryOptions{UseCache: true})
	if err != nil {
		t.Fatal(err)
	}
	reg.Service = &api.AgentService{ID: "web-2", Service: "web", Port: 81}
	reg.Node, reg.Address = "n2", "10.0.0.2"
	if _, err := c.Catalog().Register(reg, nil); err != nil {
		t.Fatal(err)
	}
	out, m2, err := c.Catalog().Service("web", "", &api.QueryOptions{UseCache: true, WaitIndex: m.LastIndex, WaitTime: 30 * time.Second})
	if err != nil || len(out) != 2 || m2.LastIndex <= m.LastIndex {
		t.Fatalf("blocking cached read: %d instances, %+v %v; want 2 at an index past %d", len(out), m2, err, m.LastIndex)
	}
}

// TestCachedBadInput: ?cached refuses ?consistent and a malformed
// Cache-Control directive with 400 naming what is wrong, before any read.
func TestCachedBadInput(t *testing.T) {
	setup := func(f *fakeRPC, cfg *Config) {
		ac, err := cache.New(cache.Config{RPC: f})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(ac.Close)
		cfg.Cache = ac
	}
	runCases(t, []apiCase{
		{name: "cached with consistent", path: "/v1/catalog/services?cached&consistent", setup: setup,
			wantCode: http.StatusBadRequest, wantBody: "Cannot specify ?cached with ?consistent, conflicting semantics."},
		{name: "max-age not a number", path: "/v1/catalog/services?cached", setup: setup,
			headers:  map[string]string{"Cache-Control": "max-age=soon"},
			wantCode: http.StatusBadRequest, wantBody: "Invalid max-age in Cache-Control header"},
		{name: "stale-if-error without a value", path: "/v1/health/service/web?cached", setup: setup,
			headers:  map[string]string{"Cache-Control": "max-age=5, stale-if-error"},
			wantCode: http.StatusBadRequest, wantBody: "Invalid stale-if-error in Cache-Control header"},
	})
}
