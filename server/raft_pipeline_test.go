package server

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fakePipeline is a raft.AppendPipeline whose responses a test hands out
// on an unbuffered channel, as the network transport's does.
type fakePipeline struct {
	responses chan raft.AppendFuture
	closed    bool
}

func (p *fakePipeline) AppendEntries(*raft.AppendEntriesRequest, *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	return nil, nil
}
func (p *fakePipeline) Consumer() <-chan raft.AppendFuture { return p.responses }
func (p *fakePipeline) Close() error                       { p.closed = true; return nil }

type fakeFuture struct {
	raft.AppendFuture
	n int
}

// TestDrainedPipelineTakesEveryResponse: the pipeline's responses are
// taken as they come even while Raft reads none (its decoder quit after a
// refused append), so the transport's reader, and the sender behind it,
// never block on them; Raft still gets them in order, and Close ends the
// relay.
func TestDrainedPipelineTakesEveryResponse(t *testing.T) {
	inner := &fakePipeline{responses: make(chan raft.AppendFuture)}
	d := newDrainedPipeline(inner)
	for i := range 50 {
		select {
		case inner.responses <- fakeFuture{n: i}:
		case <-time.After(5 * time.Second):
			t.Fatalf("response %d was not taken with nobody reading", i)
		}
	}
	for i := range 50 {
		if f := (<-d.Consumer()).(fakeFuture); f.n != i {
			t.Fatalf("response %d came as %d", i, f.n)
		}
	}
	// Left unread at Close: dropped, as Raft no longer wants them.
	inner.responses <- fakeFuture{n: 50}
	if err := d.Close(); err != nil || !inner.closed {
		t.Fatalf("Close = %v, inner closed %v", err, inner.closed)
	}
}
