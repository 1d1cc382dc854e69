package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"time"

	"github.com/trellis-mesh/trellis/gossip"
	"github.com/trellis-mesh/trellis/structs"
)

// peerProbeTimeout bounds the leader's TLS check of a server it is about
// to add to the Raft configuration.
const peerProbeTimeout = 5 * time.Second

// tlsRecordHandshake is the first byte of every TLS connection (a
// handshake record). Neither Raft (raftConnByte) nor gRPC ('P') starts
// with it, so the server port tells TLS from plaintext by peeking.
const tlsRecordHandshake byte = 0x16

// OutgoingTLS gives the configuration of connections to the server port:
// nil means plaintext. It is asked at every dial, so a reload of the
// certificates applies to the next connection.
type OutgoingTLS interface {
	OutgoingRPCConfig() *tls.Config
}

// RPCTLS is what the server port needs of the agent's TLS configuration
// (tlsutil.Configurator implements it).
type RPCTLS interface {
	OutgoingTLS
	// IncomingRPCConfig is the listener's configuration, nil without a
	// certificate; required refuses plaintext connections.
	IncomingRPCConfig() (cfg *tls.Config, required bool)
}

// secureDial wraps dial (nil: plain TCP) so that, when t asks for it, the
// connection is TLS and the server's certificate verified before any byte
// of Raft or gRPC is written.
func secureDial(dial dialFunc, t OutgoingTLS) dialFunc {
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		}
	}
	if t == nil {
		return dial
	}
	return func(ctx context.Context, addr string) (net.Conn, error) {
		conn, err := dial(ctx, addr)
		if err != nil {
			return nil, err
		}
		cfg := t.OutgoingRPCConfig()
		if cfg == nil {
			return conn, nil
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, fmt.Errorf("server: TLS handshake with %s: %w", addr, err)
		}
		return tc, nil
	}
}

// probePeerTLS calls a server that gossip announced before it becomes a
// voter, when this server's connections are TLS: gossip admits any member,
// but a server whose certificate the CA did not sign (or that does not
// accept ours) must not enter the Raft configuration, where it would count
// towards the quorum while unable to take part.
func (s *Server) probePeerTLS(meta *gossip.ServerMeta) error {
	if s.cfg.TLS == nil || s.cfg.TLS.OutgoingRPCConfig() == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), peerProbeTimeout)
	defer cancel()
	var leader string
	return structs.MethodStatusLeader.Call(ctx, s.pool.at(meta.Addr), &structs.DCSpecificRequest{}, &leader)
}
