package bench

import (
	"net"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestFleetReconnects: a simulated Envoy whose stream fails opens it again
// after a backoff, as Envoy does, and the failure is counted instead of
// ending the run; Close stops the retries.
func TestFleetReconnects(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	var accepts atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			_ = c.Close() // every stream fails in its handshake
		}
	}()
	f := StartFleet(FleetConfig{Addr: ln.Addr().String(), Proxies: []ProxySpec{{ID: "web-sidecar-proxy", Cluster: "web", Upstreams: 1}}})
	deadline := time.Now().Add(10 * time.Second)
	for f.Reconnects() < 2 || accepts.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d reconnects, %d connections: the stream was not opened again", f.Reconnects(), accepts.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	f.Close()
	if _, _, missing := f.FirstConfig(); missing != 1 {
		t.Fatalf("%d proxies without a config, want 1", missing)
	}
	_ = ln.Close()
	<-done
}
