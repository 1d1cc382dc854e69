package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// ErrMissingKey is Consul's text for a KV write without a key.
var ErrMissingKey = errors.New("Must provide key")

func (s *Server) kvsApply(ctx context.Context, args *structs.KVSRequest, reply *bool) error {
	defer since(s.metrics.kvsApply, time.Now())
	if !args.Op.IsWrite() {
		return fmt.Errorf("Invalid KVS operation %q", args.Op)
	}
	if args.DirEnt.Key == "" && args.Op != structs.KVDeleteTree {
		return ErrMissingKey
	}
	// A key whose lock holder was invalidated cannot be re-acquired until
	// the lock delay passes. The delay lives only on the leader, like
	// Consul's: it is advisory timing, not replicated state.
	if args.Op == structs.KVLock {
		if until := s.fsm.State().KVSLockDelay(args.DirEnt.Key); time.Now().Before(until) {
			*reply = false
			return nil
		}
	}
	resp, err := s.raftApplyWrite(ctx, structs.KVSRequestType, args)
	if err != nil {
		return err
	}
	ok, isBool := resp.(bool)
	*reply = isBool && ok
	return nil
}

func (s *Server) kvsGet(ctx context.Context, args *structs.KeyRequest, reply *structs.IndexedDirEntries) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, ent, err := st.KVSGet(ws, args.Key)
		if err != nil {
			return err
		}
		if ent == nil {
			reply.Index, reply.Entries = idx, nil
			return nil
		}
		reply.Index, reply.Entries = ent.ModifyIndex, structs.DirEntries{ent}
		return nil
	})
}

func (s *Server) kvsList(ctx context.Context, args *structs.KeyListRequest, reply *structs.IndexedDirEntries) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, ents, err := st.KVSList(ws, args.Prefix)
		reply.Index, reply.Entries = idx, ents
		return err
	})
}

func (s *Server) kvsListKeys(ctx context.Context, args *structs.KeyListRequest, reply *structs.IndexedKeyList) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, keys, err := st.KVSListKeys(ws, args.Prefix, args.Seperator)
		reply.Index, reply.Keys = idx, keys
		return err
	})
}
