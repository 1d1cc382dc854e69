package cli

import (
	"context"
	"fmt"
	"maps"
	"net"

	"github.com/trellis-mesh/trellis/structs"
	"github.com/trellis-mesh/trellis/xds/bootstrap"
	"github.com/trellis-mesh/trellis/xds/gen"
)

// proxyDefaultsPath is the global proxy-defaults config entry, whose Config
// holds the opaque proxy config every proxy inherits.
const proxyDefaultsPath = "/v1/config/proxy-defaults/global"

// proxyDefaults returns what the bootstrap takes from the global
// proxy-defaults entry: the proxy's opaque config as Consul's agent hands
// it to `consul connect envoy` (the entry's Config with the registration's
// own Proxy.Config over it, key by key; Trellis' agent returns the
// registration unmerged, so the merge is done here, and were the agent to
// merge too the result would be the same), and the entry's AccessLogs
// (nil when unset).
func (c *connectEnvoyCmd) proxyDefaults(ctx context.Context, client *apiClient, svc agentServiceInfo) (map[string]any, *structs.AccessLogsConfig, error) {
	var entry struct {
		Config     map[string]any
		AccessLogs *structs.AccessLogsConfig
	}
	// Read from the datacenter the registration was read from.
	err := client.getJSON(ctx, proxyDefaultsPath, nil, c.nodeName != "", &entry)
	if err != nil && !isNotFound(err) {
		return nil, nil, fmt.Errorf("failed to fetch the global proxy-defaults: %w", err)
	}
	merged := map[string]any{}
	maps.Copy(merged, entry.Config)
	if svc.Proxy != nil {
		// Even an empty value in the registration wins: it is how one
		// proxy opts out of a listener that proxy-defaults gives all.
		maps.Copy(merged, svc.Proxy.Config)
	}
	return merged, entry.AccessLogs, nil
}

// adminAccessLogs sets the admin server's access logs from proxy-defaults'
// AccessLogs, as Consul's `connect envoy` does: when they log, they replace
// -admin-access-log-path (with Consul's warning when that flag was given).
func (c *connectEnvoyCmd) adminAccessLogs(logs *structs.AccessLogsConfig, cfg *bootstrap.Config, env *Env) error {
	built, err := gen.AccessLogs(logs)
	if err != nil {
		return fmt.Errorf("failure generating Envoy access log configuration: %w", err)
	}
	if len(built) == 0 {
		return nil
	}
	cfg.AdminAccessLogs = built
	if c.adminAccessLogPath != bootstrap.DefaultAdminAccessLogPath {
		fmt.Fprintln(env.Stderr, "-admin-access-log-path and proxy-defaults.accessLogs both specify Envoy access log configuration. Ignoring the deprecated -admin-access-log-path flag.")
	}
	return nil
}

// metricsBindAddrs sets the prometheus and stats listener addresses from
// the opaque config, with host names resolved: Envoy binds listeners to IP
// literals only.
func metricsBindAddrs(ctx context.Context, opaque map[string]any, cfg *bootstrap.Config) error {
	for _, f := range []struct {
		key string
		dst *string
	}{
		{bootstrap.PrometheusBindAddrKey, &cfg.PrometheusBindAddr},
		{bootstrap.StatsBindAddrKey, &cfg.StatsBindAddr},
	} {
		raw, ok := opaque[f.key]
		if !ok || raw == nil {
			continue
		}
		v, ok := raw.(string)
		if !ok {
			return fmt.Errorf("failed parsing Proxy.Config: %s: want an \"ip:port\" string, got %v", f.key, raw)
		}
		if v == "" {
			continue
		}
		// resolveHostPort would take a missing host for loopback, which
		// for a listener meant to be scraped from elsewhere is a silent
		// surprise; Consul rejects it too (Envoy does, at start-up).
		if host, _, err := net.SplitHostPort(v); err == nil && host == "" {
			return fmt.Errorf("Invalid %s %q: an IP address or host name is required", f.key, v)
		}
		resolved, err := resolveHostPort(ctx, f.key, v)
		if err != nil {
			return err
		}
		*f.dst = resolved
	}
	return nil
}
