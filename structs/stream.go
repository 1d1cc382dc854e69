package structs

import (
	"context"
	"io"
)

// Stream is the byte stream that travels with one call of a streaming
// method (Snapshot.Save's archive, Snapshot.Restore's), beside its args
// and reply: the caller puts it in the call's context with WithStream and
// calls through the method's descriptor as for any other call, so that
// every layer on the way (a client agent's router, a follower forwarding
// to the leader) carries it unchanged, and the handler finds it with
// StreamOf. Over the internal RPC it travels in chunks of one gRPC stream:
// the args, then Upload's bytes, one way; the reply, then the handler's
// Download bytes, the other. So the reply is complete before the first
// Download byte: a handler fills it before it writes, and a caller may
// read it on the first Write (to send HTTP headers, say).
//
// A call whose stream has moved bytes is not retried: a failure after
// that is reported as it is, with ErrOutcomeUnknown for a write.
type Stream struct {
	// Upload is what the handler reads (nil: nothing).
	Upload io.Reader
	// Download receives what the handler writes (nil: nothing).
	Download io.Writer
}

type streamKey struct{}

// WithStream returns ctx carrying s for the call made with it.
func WithStream(ctx context.Context, s *Stream) context.Context {
	return context.WithValue(ctx, streamKey{}, s)
}

// StreamOf returns the stream ctx carries, or nil.
func StreamOf(ctx context.Context) *Stream {
	s, _ := ctx.Value(streamKey{}).(*Stream)
	return s
}
