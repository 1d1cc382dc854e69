package structs

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestSnakeCaseRegistration(t *testing.T) {
	body := `{"name":"web","enable_tag_override":true,"tagged_addresses":{"lan_ipv4":{"address":"10.0.0.1","port":80}},
		"meta":{"team_name":"a"},"check":{"ttl":"10s","deregister_critical_service_after":"1m"},
		"connect":{"sidecar_service":{"proxy":{"upstreams":[{"destination_name":"db","local_bind_port":9191,"config":{"connect_timeout_ms":100}}]}}}}`
	var def ServiceDefinition
	if err := json.Unmarshal(snakeToCamel([]byte(body)), &def); err != nil {
		t.Fatal(err)
	}
	if !def.EnableTagOverride || def.Check == nil || def.Check.DeregisterCriticalServiceAfter.Duration().String() != "1m0s" {
		t.Fatalf("service fields: %+v", def)
	}
	// User data keeps its keys exactly.
	if !reflect.DeepEqual(def.Meta, map[string]string{"team_name": "a"}) {
		t.Fatalf("meta = %v", def.Meta)
	}
	if _, ok := def.TaggedAddresses["lan_ipv4"]; !ok {
		t.Fatalf("tagged addresses = %v", def.TaggedAddresses)
	}
	up := def.Connect.SidecarService.Proxy.Upstreams[0]
	if up.DestinationName != "db" || up.LocalBindPort != 9191 || up.Config["connect_timeout_ms"] == nil {
		t.Fatalf("upstream = %+v", up)
	}
	// Not an object: left for the decoder to reject.
	if got := string(snakeToCamel([]byte(`[1,2`))); got != `[1,2` {
		t.Fatalf("garbage rewritten to %q", got)
	}
}
