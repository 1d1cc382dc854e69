package server

import (
	"fmt"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// applyTimeout bounds how long a write waits to be committed.
const applyTimeout = 30 * time.Second

// raftApply commits one command through Raft on the leader and returns the
// FSM's response; an error the FSM returned comes back as the error.
func (s *Server) raftApply(t structs.MessageType, msg any) (any, error) {
	buf, err := s.codec.EncodeCommand(t, msg)
	if err != nil {
		return nil, err
	}
	defer s.metrics.observeApply(time.Now())
	f := s.raft.Apply(buf, applyTimeout)
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("%w: %v", structs.ErrNoLeader, err)
	}
	resp := f.Response()
	if err, ok := resp.(error); ok {
		return nil, err
	}
	return resp, nil
}
