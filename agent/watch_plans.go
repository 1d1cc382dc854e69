package agent

import (
	"net"
	"strconv"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/watches"
)

// startWatches runs the config's watches through the agent's own HTTP
// API, replacing those of a previous config (reload). An invalid
// definition leaves the running watches as they were.
func (a *Agent) startWatches(rc *config.RuntimeConfig) error {
	a.watchesMu.Lock()
	defer a.watchesMu.Unlock()
	// Start checks every definition before it runs any.
	r, err := watches.Start(watches.Config{
		Specs:   rc.Watches,
		Address: a.httpAddr,
		Logger:  a.logger.With("component", "watch"),
	})
	if err != nil {
		return err
	}
	a.watches.Stop()
	a.watches = r
	return nil
}

// stopWatches ends the config's watches and waits for them.
func (a *Agent) stopWatches() {
	a.watchesMu.Lock()
	defer a.watchesMu.Unlock()
	a.watches.Stop()
	a.watches = nil
}

// selfAddress is how the agent dials a listener of its own: an
// unspecified IP (0.0.0.0, ::) by loopback.
func selfAddress(addr net.Addr) string {
	switch v := addr.(type) {
	case *net.UnixAddr:
		return "unix://" + v.Name
	case *net.TCPAddr:
		ip := v.IP
		if ip == nil || ip.IsUnspecified() {
			ip = net.IPv4(127, 0, 0, 1)
			if v.IP != nil && v.IP.To4() == nil {
				ip = net.IPv6loopback
			}
		}
		return net.JoinHostPort(ip.String(), strconv.Itoa(v.Port))
	}
	return addr.String()
}
