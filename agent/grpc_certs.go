package agent

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"

	"github.com/trellis-mesh/trellis/agent/grpccerts"
	"github.com/trellis-mesh/trellis/agent/httpapi"
)

// grpcCertsDir is the directory under the data dir that holds the
// certificate files of Connect-native services for gRPC applications.
const grpcCertsDir = "grpc-certs"

// startGRPCCerts keeps the certificate files of the local Connect-native
// services current (agent/grpccerts), fed by the leaf manager and its
// roots watch. Without a data dir (-dev) the files go in a private
// temporary directory that Shutdown removes.
func (a *Agent) startGRPCCerts() error {
	dir := ""
	if a.rc.DataDir != "" {
		dir = filepath.Join(a.rc.DataDir, grpcCertsDir)
	}
	w, err := grpccerts.New(grpccerts.Config{
		Dir:      dir,
		Leaves:   a.leaf,
		Roots:    a.leaf,
		Services: a.local.state,
		Changes:  a.local.state,
		Logger:   a.logger.With("component", "grpccerts"),
	})
	if err != nil {
		return err
	}
	w.Start()
	a.grpcCerts = w
	return nil
}

// httpGRPCFiles gives the HTTP API the writer's answers, with the status
// of each of its errors.
type httpGRPCFiles struct{ w *grpccerts.Writer }

func (h httpGRPCFiles) GRPCFiles(ctx context.Context, id string) (httpapi.GRPCFileSet, error) {
	f, err := h.w.Files(ctx, id)
	switch {
	case errors.Is(err, grpccerts.ErrUnknownService):
		return httpapi.GRPCFileSet{}, &httpapi.StatusError{Code: http.StatusNotFound, Msg: "unknown service ID: " + id}
	case errors.Is(err, grpccerts.ErrNotConnectNative):
		return httpapi.GRPCFileSet{}, &httpapi.StatusError{Code: http.StatusBadRequest,
			Msg: "service " + id + " is not Connect-native: register it with Connect.Native true to get gRPC certificate files"}
	case err != nil:
		return httpapi.GRPCFileSet{}, err
	}
	return httpapi.GRPCFileSet(f), nil
}

// httpGRPCFilesConfig is the writer as the HTTP API takes it: a nil
// interface when the agent keeps no files.
func (a *Agent) httpGRPCFilesConfig() httpapi.GRPCFiles {
	if a.grpcCerts == nil {
		return nil
	}
	return httpGRPCFiles{a.grpcCerts}
}
