package harness

import (
	"errors"
	"net"
	"strconv"
	"testing"
)

func TestNewPortAllocatorValidates(t *testing.T) {
	tests := []struct {
		name    string
		cfg     PortAllocatorConfig
		wantErr bool
	}{
		{"defaults", PortAllocatorConfig{}, false},
		{"explicit range", PortAllocatorConfig{Min: 20000, Max: 20100}, false},
		{"single port", PortAllocatorConfig{Min: 20000, Max: 20000}, false},
		{"min above max", PortAllocatorConfig{Min: 20100, Max: 20000}, true},
		{"privileged", PortAllocatorConfig{Min: 80, Max: 20000}, true},
		{"into ephemeral range", PortAllocatorConfig{Min: 20000, Max: 40000}, true},
		{"max exactly 32768", PortAllocatorConfig{Min: 20000, Max: 32768}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewPortAllocator(tt.cfg)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
}

func TestPortAllocatorDistinctInRangeAndFree(t *testing.T) {
	a, err := NewPortAllocator(PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	ports, err := a.Ports(200)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, p := range ports {
		if p < DefaultMinPort || p > DefaultMaxPort || p >= 32768 {
			t.Errorf("port %d outside %d-%d", p, DefaultMinPort, DefaultMaxPort)
		}
		if seen[p] {
			t.Errorf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	// The ports are free at hand-out time; spot-check that the first few
	// still bind for both protocols.
	for _, p := range ports[:5] {
		if !portFree(p) {
			t.Errorf("port %d is not bindable for TCP and UDP", p)
		}
	}
}

func TestPortAllocatorExhaustsSmallRange(t *testing.T) {
	// Find a run of ports the allocator considers free, then use exactly
	// that range.
	probe, err := NewPortAllocator(PortAllocatorConfig{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := probe.Port()
	if err != nil {
		t.Fatal(err)
	}
	if base+3 > DefaultMaxPort {
		base -= 3
	}
	a, err := NewPortAllocator(PortAllocatorConfig{Min: base, Max: base + 3})
	if err != nil {
		t.Fatal(err)
	}
	got := map[int]bool{}
	for {
		p, err := a.Port()
		if errors.Is(err, ErrNoFreePort) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if got[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		got[p] = true
		if len(got) > 4 {
			t.Fatalf("more ports than the range holds: %v", got)
		}
	}
	if len(got) == 0 {
		t.Fatalf("no port handed out from %d-%d", base, base+3)
	}
}

func TestPortAllocatorSkipsBusyPorts(t *testing.T) {
	tests := []struct {
		name string
		bind func(t *testing.T, addr string) func()
	}{
		{"tcp busy", func(t *testing.T, addr string) func() {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = ln.Close() }
		}},
		{"udp busy", func(t *testing.T, addr string) func() {
			pc, err := net.ListenPacket("udp", addr)
			if err != nil {
				t.Fatal(err)
			}
			return func() { _ = pc.Close() }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			probe, err := NewPortAllocator(PortAllocatorConfig{})
			if err != nil {
				t.Fatal(err)
			}
			p, err := probe.Port()
			if err != nil {
				t.Fatal(err)
			}
			release := tt.bind(t, net.JoinHostPort(Loopback, strconv.Itoa(p)))
			defer release()
			a, err := NewPortAllocator(PortAllocatorConfig{Min: p, Max: p})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := a.Port(); !errors.Is(err, ErrNoFreePort) {
				t.Fatalf("Port() = %d, %v; want ErrNoFreePort while %d is busy", got, err, p)
			}
			release()
			if got, err := a.Port(); err != nil || got != p {
				t.Fatalf("after release Port() = %d, %v; want %d", got, err, p)
			}
		})
	}
}
