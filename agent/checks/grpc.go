package checks

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/trellis-mesh/trellis/structs"
)

// GRPCCheckConfig configures a gRPC check.
type GRPCCheckConfig struct {
	CheckID string
	// Target is "host:port" or "host:port/service"; the service part is
	// the name sent in grpc.health.v1.HealthCheckRequest (empty: the whole
	// server).
	Target string
	// Interval between probes; Timeout bounds one probe, connection
	// included (default 10s).
	Interval time.Duration
	Timeout  time.Duration
	// TLSConfig, when non-nil, makes the probe use TLS (GRPCUseTLS);
	// otherwise it connects in plaintext.
	TLSConfig *tls.Config
	// Notifier receives results, normally through a StatusHandler.
	Notifier Notifier
	Logger   *slog.Logger
}

// GRPCCheck calls the standard gRPC health service (grpc.health.v1.Health/
// Check) periodically: SERVING is passing with "gRPC check <target>:
// success"; any other status, or any error, is critical.
type GRPCCheck struct {
	periodic
	target   string
	server   string
	service  string
	timeout  time.Duration
	dialOpts []grpc.DialOption
}

// NewGRPCCheck builds a gRPC check; Start begins probing.
func NewGRPCCheck(cfg GRPCCheckConfig) *GRPCCheck {
	server, service, _ := strings.Cut(cfg.Target, "/")
	creds := insecure.NewCredentials()
	if cfg.TLSConfig != nil {
		creds = credentials.NewTLS(cfg.TLSConfig)
	}
	c := &GRPCCheck{
		target:   cfg.Target,
		server:   server,
		service:  service,
		timeout:  positiveOr(cfg.Timeout, DefaultTimeout),
		dialOpts: []grpc.DialOption{grpc.WithTransportCredentials(creds)},
	}
	c.periodic = periodic{
		checkID:  cfg.CheckID,
		interval: cfg.Interval,
		notify:   cfg.Notifier,
		logger:   orDiscard(cfg.Logger),
		probe:    c.probeOnce,
	}
	return c
}

// Start begins probing after a random stagger within one interval.
func (c *GRPCCheck) Start() { c.lc.start(c.run) }

// Stop aborts any probe in flight and waits for the check's goroutine.
func (c *GRPCCheck) Stop() { c.lc.stop() }

func (c *GRPCCheck) probeOnce(ctx context.Context) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// A fresh connection per probe, as Consul: a cached one could report a
	// restarted server as healthy before it really is reachable again.
	// passthrough hands the address to the dialer as is (no DNS resolver),
	// like the grpc.Dial default Consul relies on.
	conn, err := grpc.NewClient("passthrough:///"+c.server, c.dialOpts...)
	if err != nil {
		return structs.HealthCritical, err.Error()
	}
	defer func() { _ = conn.Close() }()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: c.service})
	if err != nil {
		return structs.HealthCritical, err.Error()
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return structs.HealthCritical, fmt.Sprintf("gRPC %s serving status: %s", c.target, st)
	}
	return structs.HealthPassing, fmt.Sprintf("gRPC check %s: success", c.target)
}
