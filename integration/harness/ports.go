package harness

import (
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
)

// Port range defaults. The range stays below 32768, where Linux starts its
// ephemeral (outgoing connection) ports, so that a port we checked cannot be
// taken a moment later by some unrelated outgoing connection of the kernel's
// choosing.
const (
	DefaultMinPort = 15000
	DefaultMaxPort = 32000
	// ephemeralStart is the first port of Linux's default ephemeral range.
	ephemeralStart = 32768
	// portAttempts bounds the random probing per Port call.
	portAttempts = 500
)

// PortAllocatorConfig bounds the ports an allocator hands out. Zero values
// mean DefaultMinPort and DefaultMaxPort.
type PortAllocatorConfig struct {
	Min int
	Max int
}

// PortAllocator hands out distinct free ports on 127.0.0.1. A port is free
// when both a TCP listener and a UDP socket can bind it (Serf uses both on the
// same port number). The same allocator never returns a port twice, so the
// ports of processes that are down (killed, awaiting restart) stay reserved
// for them. Ports are picked at random in the range, which keeps parallel test
// processes (go test ./... runs packages in parallel) from colliding.
//
// A test owns its allocator; it is safe for concurrent use. Tests that run
// in parallel and kill processes they later restart should share one
// allocator, since another allocator could hand out a dead process's port.
type PortAllocator struct {
	min, max int

	mu   sync.Mutex
	used map[int]struct{}
}

// NewPortAllocator validates the range and returns an allocator.
func NewPortAllocator(cfg PortAllocatorConfig) (*PortAllocator, error) {
	if cfg.Min == 0 {
		cfg.Min = DefaultMinPort
	}
	if cfg.Max == 0 {
		cfg.Max = DefaultMaxPort
	}
	if cfg.Min < 1024 || cfg.Max >= ephemeralStart || cfg.Min > cfg.Max {
		return nil, fmt.Errorf("%w: port range %d-%d must lie within 1024-%d",
			ErrInvalidConfig, cfg.Min, cfg.Max, ephemeralStart-1)
	}
	return &PortAllocator{min: cfg.Min, max: cfg.Max, used: make(map[int]struct{})}, nil
}

// Port returns one free port and reserves it in this allocator.
func (a *PortAllocator) Port() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	size := a.max - a.min + 1
	for range portAttempts {
		if len(a.used) >= size {
			break
		}
		p := a.min + rand.IntN(size)
		if _, taken := a.used[p]; taken {
			continue
		}
		if !portFree(p) {
			continue
		}
		a.used[p] = struct{}{}
		return p, nil
	}
	return 0, fmt.Errorf("%w in %d-%d (%d already handed out)", ErrNoFreePort, a.min, a.max, len(a.used))
}

// Ports returns n distinct free ports.
func (a *PortAllocator) Ports(n int) ([]int, error) {
	out := make([]int, 0, n)
	for range n {
		p, err := a.Port()
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

// portFree reports whether 127.0.0.1:p can be bound for both TCP and UDP
// right now. Both sockets are held at the same time so that a port whose UDP
// side is taken is never reported free because of the TCP check alone.
func portFree(p int) bool {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false
	}
	defer func() { _ = ln.Close() }()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		return false
	}
	defer func() { _ = pc.Close() }()
	return true
}
