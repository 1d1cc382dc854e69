package bench

import (
	"testing"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpointv3 "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
)

// cla is an endpoint set of cluster with endpoints at addrs ("ip:port"
// as ip and port).
func cla(cluster string, eps ...struct {
	ip   string
	port uint32
}) *endpointv3.ClusterLoadAssignment {
	var lb []*endpointv3.LbEndpoint
	for _, e := range eps {
		lb = append(lb, &endpointv3.LbEndpoint{HostIdentifier: &endpointv3.LbEndpoint_Endpoint{Endpoint: &endpointv3.Endpoint{
			Address: &corev3.Address{Address: &corev3.Address_SocketAddress{SocketAddress: &corev3.SocketAddress{
				Address: e.ip, PortSpecifier: &corev3.SocketAddress_PortValue{PortValue: e.port},
			}}},
		}}})
	}
	return &endpointv3.ClusterLoadAssignment{ClusterName: cluster, Endpoints: []*endpointv3.LocalityLbEndpoints{{LbEndpoints: lb}}}
}

type ep = struct {
	ip   string
	port uint32
}

func TestChangeShows(t *testing.T) {
	const sni = "web.default.dc1.internal.11111111-2222-3333-4444-555555555555.consul"
	added := Change{Addr: "10.0.0.9", Port: 21000}
	removed := Change{Addr: "10.0.0.9", Port: 21000, Gone: true, Prefix: "web."}
	tests := []struct {
		name   string
		change Change
		set    *endpointv3.ClusterLoadAssignment
		want   bool
	}{
		{"addition: set holds the endpoint", added, cla(sni, ep{"10.0.0.1", 21000}, ep{"10.0.0.9", 21000}), true},
		{"addition: another port", added, cla(sni, ep{"10.0.0.9", 21001}), false},
		{"addition: another address", added, cla(sni, ep{"10.0.0.19", 21000}), false},
		{"addition: empty set", added, cla(sni), false},
		{"addition: any cluster", added, cla("other.default.dc1", ep{"10.0.0.9", 21000}), true},
		{"removal: the upstream's set without it", removed, cla(sni, ep{"10.0.0.1", 21000}), true},
		{"removal: the upstream's set, now empty", removed, cla(sni), true},
		{"removal: the set still holds it", removed, cla(sni, ep{"10.0.0.9", 21000}), false},
		{"removal: another upstream's set", removed, cla("api.default.dc1", ep{"10.0.0.1", 21000}), false},
		{"removal: a service whose name extends the upstream's", removed, cla("web2.default.dc1"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.change.Shows(tt.set); got != tt.want {
				t.Errorf("Shows = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestExpect(t *testing.T) {
	change := Change{Addr: "10.0.0.9", Port: 21000}
	with, without := cla("web.x", ep{"10.0.0.9", 21000}), cla("web.x", ep{"10.0.0.1", 21000})
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	type obs struct {
		stream int
		set    *endpointv3.ClusterLoadAssignment
		ms     int
	}
	tests := []struct {
		name        string
		affected    []bool
		obs         []obs
		wantDelays  []time.Duration
		wantMissing int
		wantDone    bool
	}{
		{
			name:       "every affected stream, first arrival counts",
			affected:   []bool{true, true},
			obs:        []obs{{0, without, 1}, {0, with, 3}, {1, with, 5}, {0, with, 9}},
			wantDelays: []time.Duration{3 * time.Millisecond, 5 * time.Millisecond}, wantDone: true,
		},
		{
			name:       "an unaffected stream is ignored",
			affected:   []bool{false, true},
			obs:        []obs{{0, with, 1}, {1, with, 2}},
			wantDelays: []time.Duration{2 * time.Millisecond}, wantDone: true,
		},
		{
			name:       "a stream that never got it is missing",
			affected:   []bool{true, true},
			obs:        []obs{{0, with, 4}, {1, without, 4}},
			wantDelays: []time.Duration{4 * time.Millisecond}, wantMissing: 1,
		},
		{
			name:       "an arrival before the write's answer is a negative delay",
			affected:   []bool{true},
			obs:        []obs{{0, with, -2}},
			wantDelays: []time.Duration{-2 * time.Millisecond}, wantDone: true,
		},
		{
			name: "no stream affected is done at once", affected: []bool{false}, wantDone: true,
		},
		{
			name: "out-of-range streams are ignored", affected: []bool{true},
			obs: []obs{{-1, with, 1}, {1, with, 1}}, wantMissing: 1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			x := NewExpect(change, tt.affected)
			for _, o := range tt.obs {
				x.Observe(o.stream, o.set, at(o.ms))
			}
			delays, missing := x.Delays(t0)
			if len(delays) != len(tt.wantDelays) || missing != tt.wantMissing {
				t.Fatalf("Delays = %v, %d missing; want %v, %d missing", delays, missing, tt.wantDelays, tt.wantMissing)
			}
			for i := range delays {
				if delays[i] != tt.wantDelays[i] {
					t.Errorf("delay %d = %v, want %v", i, delays[i], tt.wantDelays[i])
				}
			}
			select {
			case <-x.Done():
				if !tt.wantDone {
					t.Error("done, want not done")
				}
			default:
				if tt.wantDone {
					t.Error("not done, want done")
				}
			}
		})
	}
	var none *Expect
	none.Observe(0, with, t0) // a disarmed fleet observes nothing
}
