package server

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/trellis-mesh/trellis/structs"
)

// errorDomain marks the ErrorInfo detail that names a structs sentinel.
const errorDomain = "trellis.internal"

// grpcCodes is the one mapping of error classes to gRPC codes on the
// internal RPC wire.
func grpcCode(c structs.Code) codes.Code {
	switch c {
	case structs.CodeNoLeader, structs.CodeUnavailable:
		return codes.Unavailable
	case structs.CodePermissionDenied:
		return codes.PermissionDenied
	case structs.CodeNotFound:
		return codes.NotFound
	case structs.CodeInvalidArgument:
		return codes.InvalidArgument
	case structs.CodeRateLimited:
		return codes.ResourceExhausted
	case structs.CodeFailedPrecondition:
		return codes.FailedPrecondition
	case structs.CodeMaybeApplied:
		return codes.Aborted
	}
	return codes.Unknown
}

// statusOf is what a handler's error becomes on the wire: its message, the
// gRPC code of its class, and the name of the sentinel it wraps, so that
// the caller's errors.Is matches the same sentinel (see errorOf).
func statusOf(err error) error {
	e := structs.SentinelOf(err)
	if e == nil {
		return status.Error(codes.Unknown, err.Error())
	}
	st, derr := status.New(grpcCode(e.Code()), err.Error()).
		WithDetails(&errdetails.ErrorInfo{Domain: errorDomain, Reason: e.Name()})
	if derr != nil {
		return status.Error(codes.Unknown, err.Error())
	}
	return st.Err()
}

// errorOf rebuilds a server's error from its status, or returns nil when
// the status carries no server error (the call failed in transport).
func errorOf(st *status.Status) error {
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == errorDomain {
			return structs.WireError(info.GetReason(), st.Message())
		}
	}
	if st.Code() == codes.Unknown {
		return structs.WireError("", st.Message())
	}
	return nil
}
