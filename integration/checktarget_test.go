package integration

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// checkTarget is what an HTTP or TCP health check probes: a listener on
// 127.0.0.1 that the test stops and starts again on the same port. In HTTP
// mode it answers every request with the status set by setStatus; in TCP
// mode it accepts and closes connections.
//
// It owns its serving goroutines: stop (and the t.Cleanup registered by
// newCheckTarget) closes the listener and waits for them.
type checkTarget struct {
	httpMode bool
	addr     string // "127.0.0.1:port", fixed for the target's life
	status   atomic.Int32

	mu  sync.Mutex
	ln  net.Listener
	srv *http.Server
	wg  sync.WaitGroup
}

// rebindTimeout bounds how long start retries binding the same port again
// (another process may hold it for a moment after the close).
const rebindTimeout = 5 * time.Second

// newCheckTarget starts a target on a fresh loopback port.
func newCheckTarget(t *testing.T, httpMode bool) *checkTarget {
	t.Helper()
	ct := &checkTarget{httpMode: httpMode, addr: "127.0.0.1:0"}
	ct.status.Store(http.StatusOK)
	if err := ct.start(); err != nil {
		t.Fatal(err)
	}
	ct.addr = ct.ln.Addr().String()
	t.Cleanup(ct.stop)
	return ct
}

// url is the HTTP check's target.
func (ct *checkTarget) url() string { return "http://" + ct.addr + "/health" }

// setStatus sets the HTTP status the target answers with.
func (ct *checkTarget) setStatus(code int) { ct.status.Store(int32(code)) }

// start listens on the target's address again and serves.
func (ct *checkTarget) start() error {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.ln != nil {
		return nil
	}
	var ln net.Listener
	var err error
	deadline := time.Now().Add(rebindTimeout)
	for {
		ln, err = net.Listen("tcp", ct.addr)
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("check target: listen on %s: %w", ct.addr, err)
	}
	ct.ln = ln
	if ct.httpMode {
		ct.srv = &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				code := int(ct.status.Load())
				w.WriteHeader(code)
				_, _ = fmt.Fprintf(w, "check target says %d\n", code)
			}),
			ReadHeaderTimeout: 5 * time.Second,
		}
		srv := ct.srv
		ct.wg.Go(func() { _ = srv.Serve(ln) })
		return nil
	}
	ct.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue
			}
			_ = conn.Close()
		}
	})
	return nil
}

// stop closes the listener (and, in HTTP mode, every open connection) and
// waits for the serving goroutines. Connecting then fails with "connection
// refused".
func (ct *checkTarget) stop() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.ln == nil {
		return
	}
	if ct.srv != nil {
		_ = ct.srv.Close()
		ct.srv = nil
	}
	_ = ct.ln.Close()
	ct.ln = nil
	ct.wg.Wait()
}
