package server

import (
	"errors"
	"fmt"

	"github.com/hashicorp/raft"
)

// ErrLogWriteFailed: this server could not write its Raft log (a full or
// failing disk) and stopped taking part in Raft; see failStopLog.
var ErrLogWriteFailed = errors.New("raft log write failed: this server stopped taking part in raft; free the disk and restart it")

// failStopLog makes a failed Raft log write stop this server's Raft, as
// etcd stops on a failed write-ahead-log write. Raft alone answers the
// failure by stepping down, and a leader whose disk is full is elected
// again at once (its followers vote for the leader they know) and steps
// down again at its first entry: the cluster makes no progress until the
// disk recovers. Stopped, the server looks dead to the others, which elect
// a leader among themselves.
type failStopLog struct {
	raft.LogStore
	failed func(error)
}

func (f *failStopLog) StoreLog(l *raft.Log) error { return f.StoreLogs([]*raft.Log{l}) }

func (f *failStopLog) StoreLogs(logs []*raft.Log) error {
	err := f.LogStore.StoreLogs(logs)
	if err != nil {
		f.failed(err)
	}
	return err
}

// stopOnLogFailure runs until the server shuts down, stopping Raft the
// first time a log write fails. It runs on its own goroutine because the
// failing write runs on Raft's, which Raft's Shutdown waits for.
func (s *Server) stopOnLogFailure() {
	select {
	case <-s.ctx.Done():
	case err := <-s.logFailed:
		s.logger.Error("cannot write the raft log; stopping raft on this server", "error", err, "remedy", ErrLogWriteFailed)
		s.raftStopped.Store(true)
		if err := s.raft.Shutdown().Error(); err != nil {
			s.logger.Warn("raft shutdown after a log write failure", "error", err)
		}
		// Raft's Shutdown leaves the transport open: it would go on
		// accepting the peers' RPCs and never answer them, and a leader's
		// pipeline to this server would then block for good, its own
		// Shutdown with it. Closed, this server looks dead to its peers.
		s.transport.CloseStreams()
		if err := s.transport.Close(); err != nil {
			s.logger.Warn("raft transport close after a log write failure", "error", err)
		}
		s.failure = fmt.Errorf("%w: %w", ErrLogWriteFailed, err)
		close(s.failed)
	}
}

// Failed is closed once this server can no longer do its job: its Raft
// stopped after a failed log write. The process should then exit with an
// error (as etcd does) so that a supervisor or an operator sees it, rather
// than run on as a server that answers nothing; Failure says why.
func (s *Server) Failed() <-chan struct{} { return s.failed }

// Failure is why the server failed (an error wrapping ErrLogWriteFailed),
// once Failed is closed; nil before.
func (s *Server) Failure() error {
	select {
	case <-s.failed:
		return s.failure
	default:
		return nil
	}
}

// logWriteFailed records the first log write failure for stopOnLogFailure.
func (s *Server) logWriteFailed(err error) {
	select {
	case s.logFailed <- err:
	default:
	}
}
