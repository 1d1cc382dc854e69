package httpapi

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
)

// GRPCFiles tells where the agent keeps a Connect-native service's
// certificate files for gRPC applications (agent/grpccerts).
type GRPCFiles interface {
	// GRPCFiles returns the files of the local service registered under
	// id, waiting until they are first written or ctx ends (then Ready is
	// false). An unknown ID or a service that is not Connect-native is an
	// error with its HTTP status attached (StatusError).
	GRPCFiles(ctx context.Context, id string) (GRPCFileSet, error)
}

// GRPCFileSet is the answer of GET /v1/agent/connect/grpc-files/<id>. It
// has agent/grpccerts.Files' fields, which the API may not import: the
// agent converts one to the other, so the two cannot drift apart silently.
type GRPCFileSet struct {
	ServiceID string
	Service   string
	// Dir holds the three files.
	Dir      string
	CertFile string
	KeyFile  string
	CAFile   string
	// Ready is whether every file has been written at least once.
	Ready bool
}

// grpcFilesWait bounds how long the endpoint waits for a new service's
// first leaf: signing takes milliseconds once the CA exists, and an
// answer with Ready false tells the caller to look again.
const grpcFilesWait = 10 * time.Second

// agentGRPCFiles serves GET /v1/agent/connect/grpc-files/<service-id>, a
// Trellis endpoint (Consul has no proxyless gRPC): where the agent keeps
// the service's leaf, key and CA roots for gRPC's file_watcher
// certificate provider. Reading it needs service:write on the service,
// as its leaf does, since the answer leads to the private key.
func (s *Server) agentGRPCFiles(_ http.ResponseWriter, r *http.Request) (any, error) {
	id := pathSuffix(r, "/v1/agent/connect/grpc-files/")
	if id == "" {
		return nil, badRequest("Missing service ID")
	}
	if s.local == nil || s.grpcFiles == nil {
		return nil, &StatusError{Code: http.StatusNotImplemented, Msg: "gRPC certificate files are not kept by this agent"}
	}
	svc, _, _ := s.local.WatchService(id)
	if svc == nil {
		return nil, &StatusError{Code: http.StatusNotFound, Msg: fmt.Sprintf("unknown service ID: %s", id)}
	}
	if err := s.requireACL(r, authz.Write(acl.ResourceService, svc.Service)); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(r.Context(), grpcFilesWait)
	defer cancel()
	return s.grpcFiles.GRPCFiles(ctx, id)
}
