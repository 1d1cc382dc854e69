package fsm

import (
	"bytes"
	"io"
	"reflect"
	"testing"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// TestVirtualIPCommandAndSnapshot: a registration assigns a virtual IP,
// the UpdateVirtualIP command sets manual ones (and a retry under the same
// request ID returns the first answer), and both travel in a snapshot.
func TestVirtualIPCommandAndSnapshot(t *testing.T) {
	f := New(Config{})
	last := populate(t, f)
	for _, svc := range []string{"one", "two"} {
		last++
		apply(t, f, last, structs.RegisterRequestType, &structs.RegisterRequest{Node: "n1", Address: "10.0.0.1",
			Service: &structs.NodeService{ID: svc, Service: svc, Port: 80, Connect: structs.ServiceConnect{Native: true}}})
	}
	now := time.Now()
	steps := []struct {
		id   string
		req  structs.AssignServiceManualVIPsRequest
		want *structs.AssignServiceManualVIPsResponse
	}{
		{"m1", structs.AssignServiceManualVIPsRequest{Service: "one", ManualVIPs: []string{"1.1.1.1", "2.2.2.2"}},
			&structs.AssignServiceManualVIPsResponse{Found: true}},
		{"m2", structs.AssignServiceManualVIPsRequest{Service: "two", ManualVIPs: []string{"2.2.2.2"}},
			&structs.AssignServiceManualVIPsResponse{Found: true, UnassignedFrom: []structs.PeeredServiceName{{ServiceName: structs.CompoundServiceName{Name: "one"}}}}},
		{"m2", structs.AssignServiceManualVIPsRequest{Service: "two", ManualVIPs: []string{"2.2.2.2"}}, // the retry
			&structs.AssignServiceManualVIPsResponse{Found: true, UnassignedFrom: []structs.PeeredServiceName{{ServiceName: structs.CompoundServiceName{Name: "one"}}}}},
		{"m3", structs.AssignServiceManualVIPsRequest{Service: "missing", ManualVIPs: []string{"1.1.1.1"}},
			&structs.AssignServiceManualVIPsResponse{}},
	}
	for i, s := range steps {
		last++
		got := apply(t, f, last, structs.DedupRequestType, dedup(t, s.id, now, structs.UpdateVirtualIPRequestType, &s.req))
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("step %d: got %#v, want %#v", i, got, s.want)
		}
	}
	dst := New(Config{})
	if err := dst.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	for svc, want := range map[string]structs.ServiceVirtualIP{
		"one": {Service: "one", IP: "240.0.0.1", ManualIPs: []string{"1.1.1.1"}},
		"two": {Service: "two", IP: "240.0.0.2", ManualIPs: []string{"2.2.2.2"}},
	} {
		_, v, err := dst.State().ServiceVirtualIP(nil, svc)
		if err != nil || v == nil {
			t.Fatalf("%s after restore: %v, %v", svc, v, err)
		}
		v.RaftIndex = structs.RaftIndex{}
		if !reflect.DeepEqual(*v, want) {
			t.Fatalf("%s after restore = %+v, want %+v", svc, *v, want)
		}
	}
}
