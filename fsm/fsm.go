// Package fsm is Trellis' raft.FSM: a thin dispatcher that decodes each Raft
// log entry by its command number and applies it to the state store, plus
// the snapshot and restore of that store as a versioned record stream.
package fsm

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/hashicorp/raft"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ErrEmptyCommand is returned for a log entry without a type byte.
var ErrEmptyCommand = errors.New("fsm: empty command")

// ErrDecode wraps a command body that does not decode.
var ErrDecode = errors.New("fsm: cannot decode command")

// Config holds the FSM's dependencies.
type Config struct {
	Logger *slog.Logger
	// Codec decodes commands and snapshot records; nil means a new one.
	Codec *structs.Codec
}

// applyFunc applies one decoded command at a Raft index and returns what the
// caller of raft.Apply receives as the future's Response.
type applyFunc func(f *FSM, idx uint64, body []byte) any

// FSM applies Raft commands to a state store. The store is swapped for a new
// one on restore; callers must fetch it with State for every query.
type FSM struct {
	logger *slog.Logger
	codec  *structs.Codec
	table  map[structs.MessageType]applyFunc

	mu sync.RWMutex
	// state is guarded by mu: Restore replaces it.
	state *state.Store
}

// New returns an FSM over an empty store.
func New(cfg Config) *FSM {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Codec == nil {
		cfg.Codec = structs.NewCodec()
	}
	return &FSM{
		logger: cfg.Logger,
		codec:  cfg.Codec,
		table:  commandTable(),
		state:  state.NewStore(),
	}
}

// State returns the current store. Hold on to it only for one query: a
// restore abandons it (closing its AbandonCh) and installs a new one.
func (f *FSM) State() *state.Store {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.state
}

// Apply applies one log entry. Unknown commands flagged ignorable are
// skipped; any other unknown command panics, because applying the rest of
// the log without it would silently diverge this replica from the others.
func (f *FSM) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand {
		return nil
	}
	return f.applyCommand(l.Index, l.Data)
}

// applyCommand dispatches one framed command (type byte, body) at idx.
func (f *FSM) applyCommand(idx uint64, data []byte) any {
	if len(data) == 0 {
		return ErrEmptyCommand
	}
	t := structs.MessageType(data[0])
	fn, ok := f.table[t&^structs.IgnoreUnknownTypeFlag]
	if !ok {
		if t&structs.IgnoreUnknownTypeFlag != 0 {
			f.logger.Warn("skipping unknown ignorable raft command", "type", uint8(t), "index", idx)
			return nil
		}
		panic(fmt.Errorf("fsm: unknown raft command type %d at index %d: this server is older than the cluster's log", t, idx))
	}
	return fn(f, idx, data[1:])
}

// decode decodes a command body into v, wrapping failures in ErrDecode.
func (f *FSM) decode(body []byte, v any) error {
	if err := f.codec.Unmarshal(body, v); err != nil {
		return fmt.Errorf("%w: %v", ErrDecode, err) //nolint:errorlint // wraps the sentinel alone; the cause is only text, kept out of the chain callers match
	}
	return nil
}
