package server

import (
	"github.com/hashicorp/raft"
)

// pipelinedTransport is the Raft transport with every replication
// pipeline wrapped in a drainedPipeline.
//
// hashicorp/raft v1.7 can deadlock a pipeline: when a follower answers an
// append with Success=false (a full disk, a diverged log, a restart), the
// leader's decoder for that follower returns and nothing reads the
// pipeline's responses any more. The transport's response reader then
// blocks handing over the next one, its unbuffered in-flight channel
// fills, and the sender blocks in AppendEntries before it sees that the
// decoder quit: that follower is never sent another entry, and the
// leader's Shutdown waits for ever. Taking every response off the
// transport at once breaks the cycle; turning pipelining off would too,
// at a cost of 10-25 % of the write throughput of a 3-server cluster on
// disk (BenchmarkKVWrites, BenchmarkCatalogWrites).
type pipelinedTransport struct {
	*raft.NetworkTransport
}

// AppendEntriesPipeline returns the transport's pipeline, drained.
func (t pipelinedTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return newDrainedPipeline(p), nil
}

// drainedPipeline relays a pipeline's responses through a queue that
// always takes the next one, whether or not Raft still reads them. It
// adds no in-flight requests: those are bounded by the transport's
// reader, which takes a request only once it has read the previous
// response. The queue holds what Raft did not read, until Close.
type drainedPipeline struct {
	raft.AppendPipeline
	out  chan raft.AppendFuture
	stop chan struct{}
	done chan struct{}
}

func newDrainedPipeline(p raft.AppendPipeline) *drainedPipeline {
	d := &drainedPipeline{AppendPipeline: p, out: make(chan raft.AppendFuture), stop: make(chan struct{}), done: make(chan struct{})}
	go d.relay()
	return d
}

// Consumer is where Raft reads the responses, in order.
func (d *drainedPipeline) Consumer() <-chan raft.AppendFuture { return d.out }

// Close closes the pipeline and waits for the relay to end. Raft calls it
// once, when its replication to the follower stops.
func (d *drainedPipeline) Close() error {
	err := d.AppendPipeline.Close()
	close(d.stop)
	<-d.done
	return err
}

func (d *drainedPipeline) relay() {
	defer close(d.done)
	in := d.AppendPipeline.Consumer()
	var queue []raft.AppendFuture
	for {
		var out chan raft.AppendFuture
		var next raft.AppendFuture
		if len(queue) > 0 {
			out, next = d.out, queue[0]
		}
		select {
		case f := <-in:
			queue = append(queue, f)
		case out <- next:
			queue[0] = nil
			queue = queue[1:]
		case <-d.stop:
			return
		}
	}
}
