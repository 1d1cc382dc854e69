package agent

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"
)

// TestAgentMultiPortServices: Consul 1.22's Ports of a service, from a
// config file and from the official client's registration, are kept by
// the agent (and shown by /v1/agent/services, with the Locality), synced to the catalog and returned by the agent, health and
// catalog endpoints (ServicePorts in a catalog instance); bad Ports are
// refused with 400 before anything is stored.
func TestAgentMultiPortServices(t *testing.T) {
	_, url, _ := devAgent(t, `{"service":{"name":"redis","ports":[{"name":"http","port":8080,"default":true},{"name":"metrics","port":9090}]}}`)
	c, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(url, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	want := api.ServicePorts{{Name: "http", Port: 8080, Default: true}, {Name: "metrics", Port: 9090}}
	locality := &api.Locality{Region: "us-west-1", Zone: "us-west-1a"}
	if err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "srv-1", Ports: want, Locality: locality}); err != nil {
		t.Fatal(err)
	}
	services, err := c.Agent().Services()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"redis", "srv-1"} {
		svc := services[id]
		if svc == nil || !slices.Equal(svc.Ports, want) {
			t.Fatalf("agent service %s = %+v, want ports %+v", id, svc, want)
		}
	}
	if got := services["srv-1"].Locality; got == nil || *got != *locality {
		t.Fatalf("agent service locality = %+v, want %+v", got, locality)
	}

	waitFor(t, "srv-1 in the catalog", func() bool {
		entries, _, err := c.Health().Service("srv-1", "", false, nil)
		return err == nil && len(entries) == 1 && slices.Equal(entries[0].Service.Ports, want)
	})
	code, body := get(t, url+"/v1/catalog/service/srv-1")
	var instances []struct{ ServicePorts api.ServicePorts }
	if err := json.Unmarshal([]byte(body), &instances); code != http.StatusOK || err != nil || len(instances) != 1 || !slices.Equal(instances[0].ServicePorts, want) {
		t.Fatalf("catalog service: %d %s (%v), want ServicePorts %+v", code, body, err, want)
	}

	bad := []struct {
		name  string
		ports api.ServicePorts
	}{
		{"no default", api.ServicePorts{{Name: "http", Port: 8080}}},
		{"duplicate name", api.ServicePorts{{Name: "http", Port: 8080, Default: true}, {Name: "http", Port: 8081}}},
		{"no port", api.ServicePorts{{Name: "http", Default: true}}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			err := c.Agent().ServiceRegister(&api.AgentServiceRegistration{Name: "bad", Ports: tt.ports})
			var se api.StatusError
			if !errors.As(err, &se) || se.Code != http.StatusBadRequest || !strings.Contains(se.Body, "Ports") {
				t.Fatalf("register: %v, want a 400 naming Ports", err)
			}
			if services, _ := c.Agent().Services(); services["bad"] != nil {
				t.Fatal("a refused registration was stored")
			}
		})
	}
}

// TestAgentCachedReads: an agent answers the official client's UseCache
// reads from its cache: a miss, then hits.
func TestAgentCachedReads(t *testing.T) {
	_, url, _ := devAgent(t, `{"service":{"name":"web","port":80}}`)
	c, err := api.NewClient(&api.Config{Address: strings.TrimPrefix(url, "http://")})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "web in the catalog", func() bool {
		out, _, err := c.Catalog().Service("web", "", nil)
		return err == nil && len(out) == 1
	})
	_, m, err := c.Catalog().Service("web", "", &api.QueryOptions{UseCache: true})
	if err != nil || m.CacheHit {
		t.Fatalf("first: %+v %v, want a miss", m, err)
	}
	out, m, err := c.Catalog().Service("web", "", &api.QueryOptions{UseCache: true})
	if err != nil || !m.CacheHit || len(out) != 1 {
		t.Fatalf("second: %d %+v %v, want a hit", len(out), m, err)
	}
}
