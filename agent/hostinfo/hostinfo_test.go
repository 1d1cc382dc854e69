package hostinfo

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// TestCollect reads this machine: every part is present (the test hosts
// are Linux, where gopsutil reads all of them), and the JSON has Consul's
// top-level fields.
func TestCollect(t *testing.T) {
	before := time.Now().UnixNano()
	info := Collect(context.Background())
	if len(info.Errors) != 0 {
		t.Fatalf("errors: %v", info.Errors)
	}
	if info.Host == nil || info.Host.Hostname == "" || info.Memory == nil || info.Memory.Total == 0 ||
		info.Disk == nil || info.Disk.Path != "/" || len(info.CPU) == 0 {
		t.Fatalf("info %+v", info)
	}
	if info.CollectionTime < before || info.CollectionTime > time.Now().UnixNano() {
		t.Fatalf("CollectionTime %d not within the call", info.CollectionTime)
	}
	b, err := json.Marshal(info)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"Memory", "CPU", "Host", "Disk", "CollectionTime", "Errors"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("JSON lacks %s: %s", k, b)
		}
	}
}
