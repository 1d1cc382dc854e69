package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect/intentions"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// Intention errors with Consul's texts.
var (
	// ErrIntentionMeta refuses Meta on a new exact intention: it would
	// have to be stored on the enclosing config entry.
	ErrIntentionMeta = errors.New("Meta must not be specified")
	// ErrIntentionMetaChanged refuses Meta that differs from the enclosing
	// entry's on an update.
	ErrIntentionMetaChanged = errors.New("Meta must not be specified, or should be unchanged during an update.")
	// ErrIntentionID refuses an ID on the exact (config entry) endpoint.
	ErrIntentionID = errors.New("ID must not be specified")
)

// Intention policies of the server configuration.
const (
	IntentionPolicyAllow = "allow"
	IntentionPolicyDeny  = "deny"
)

// intentionCASRetries bounds how often an intention write re-reads its
// entry after losing the check-and-set to a concurrent write of it.
const intentionCASRetries = 10

// intentionApply writes one source of the destination's service-intentions
// entry: upsert or delete by source and destination, or the legacy
// create, update and delete by ID (intention_legacy.go), which answer the
// intention's ID. It runs on the leader as a read-modify-write guarded by a
// check-and-set on the entry, retried when another write to the same entry
// won.
func (s *Server) intentionApply(ctx context.Context, args *structs.IntentionRequest, reply *string) error {
	*reply = ""
	// The argument may be the caller's own (an in-process RPC): never
	// modified.
	ixn := structs.CloneIntention(args.Intention)
	if ixn == nil {
		ixn = &structs.Intention{}
	}
	// Only a delete by ID names no services.
	deleteByID := args.Op == structs.IntentionOpDelete && ixn.ID != ""
	now := time.Now().UTC()
	var change func() (*structs.ConfigEntryRequest, error)
	switch args.Op {
	case structs.IntentionOpUpsert, structs.IntentionOpDelete:
		switch {
		case deleteByID:
			change = func() (*structs.ConfigEntryRequest, error) { return s.legacyIntentionDelete(ixn.ID) }
		case args.Op == structs.IntentionOpUpsert && ixn.ID != "":
			return ErrIntentionID
		default:
			change = func() (*structs.ConfigEntryRequest, error) { return s.intentionChange(args.Op, ixn) }
		}
	case structs.IntentionOpCreate:
		if ixn.ID != "" {
			return ErrIntentionCreateID
		}
		change = func() (*structs.ConfigEntryRequest, error) { return s.legacyIntentionCreate(ixn, now) }
	case structs.IntentionOpUpdate:
		change = func() (*structs.ConfigEntryRequest, error) { return s.legacyIntentionUpdate(ixn, now) }
	default:
		return fmt.Errorf("Invalid Intention operation: %v", args.Op)
	}
	if !deleteByID && (ixn.SourceName == "" || ixn.DestinationName == "") {
		return errors.New("SourceName and DestinationName must be set")
	}
	if args.Op == structs.IntentionOpCreate {
		id, err := s.newIntentionID()
		if err != nil {
			return err
		}
		ixn.ID = id
	}
	for attempt := 0; attempt < intentionCASRetries; attempt++ {
		req, err := change()
		if err != nil {
			return err
		}
		if req != nil {
			req.WriteRequest = args.WriteRequest
			resp, err := s.raftApplyWrite(ctx, structs.ConfigEntryRequestType, req)
			if err != nil {
				return err
			}
			if ok, _ := resp.(bool); !ok {
				continue
			}
		}
		if args.Op != structs.IntentionOpUpsert {
			*reply = ixn.ID // the legacy writes' answer, "" for a delete by name
		}
		return nil
	}
	return fmt.Errorf("intention write for %q lost %d check-and-set races; try again", ixn.DestinationName, intentionCASRetries)
}

// intentionChange computes the config entry write that applies the
// intention change to the current entry, or nil when nothing changes.
func (s *Server) intentionChange(op structs.IntentionOp, ixn *structs.Intention) (*structs.ConfigEntryRequest, error) {
	prev, err := s.intentionEntry(ixn.DestinationName)
	if err != nil {
		return nil, err
	}
	if op == structs.IntentionOpDelete {
		if prev == nil || prev.FindSource(ixn.SourceName) == nil {
			return nil, nil // deletes by name are idempotent
		}
		next := structs.CloneConfigEntry(prev).(*structs.ServiceIntentionsConfigEntry)
		next.DeleteSource(ixn.SourceName)
		if len(next.Sources) == 0 {
			return &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS, Entry: next}, nil
		}
		return &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsertCAS, Entry: next}, nil
	}

	var next *structs.ServiceIntentionsConfigEntry
	if prev == nil {
		if len(ixn.Meta) > 0 {
			return nil, ErrIntentionMeta
		}
		next = &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: ixn.DestinationName}
	} else {
		if len(ixn.Meta) > 0 && !equalStringMaps(prev.Meta, ixn.Meta) {
			return nil, ErrIntentionMetaChanged
		}
		next = structs.CloneConfigEntry(prev).(*structs.ServiceIntentionsConfigEntry)
	}
	src := ixn.ToSourceIntention()
	next.UpsertSource(src)
	if err := next.Normalize(); err != nil {
		return nil, err
	}
	if err := next.Validate(); err != nil {
		return nil, err
	}
	if prev != nil && structs.ConfigEntriesEqual(prev, next) {
		return nil, nil
	}
	// The CAS index travels in the entry: 0 creates, otherwise it must
	// still be the stored entry's.
	next.ModifyIndex = 0
	if prev != nil {
		next.ModifyIndex = prev.ModifyIndex
	}
	return &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsertCAS, Entry: next}, nil
}

// intentionEntry returns the stored service-intentions entry of the
// destination (not to be modified), or nil.
func (s *Server) intentionEntry(destination string) (*structs.ServiceIntentionsConfigEntry, error) {
	_, raw, err := s.fsm.State().ConfigEntry(nil, structs.ServiceIntentions, destination)
	if err != nil {
		return nil, fmt.Errorf("Intention lookup failed: %w", err)
	}
	if raw == nil {
		return nil, nil
	}
	return raw.(*structs.ServiceIntentionsConfigEntry), nil
}

func equalStringMaps(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if bv, ok := b[k]; !ok || bv != v {
			return false
		}
	}
	return true
}

// intentionGet reads the intention named by its legacy ID or by source and
// destination (blocking); a missing one is structs.ErrIntentionNotFound.
func (s *Server) intentionGet(ctx context.Context, args *structs.IntentionQueryRequest, reply *structs.IndexedIntentions) error {
	if args.IntentionID == "" && args.Exact == nil {
		return errors.New("Exact must be specified on args")
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		var (
			idx uint64
			ixn *structs.Intention
			err error
		)
		if args.IntentionID != "" {
			idx, _, ixn, err = st.IntentionGetByID(ws, args.IntentionID)
		} else {
			idx, ixn, err = st.IntentionGetExact(ws, args.Exact.SourceName, args.Exact.DestinationName)
		}
		if err != nil {
			return err
		}
		reply.Index = idx
		if ixn == nil {
			return structs.ErrIntentionNotFound
		}
		reply.Intentions = structs.Intentions{ixn}
		return nil
	})
}

// intentionList lists every intention by precedence (blocking).
func (s *Server) intentionList(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedIntentions) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, ixns, err := st.Intentions(ws)
		reply.Index, reply.Intentions = idx, ixns
		return err
	})
}

// intentionMatch returns, for each name, the intentions that apply to it
// as a source or destination (blocking).
func (s *Server) intentionMatch(ctx context.Context, args *structs.IntentionQueryRequest, reply *structs.IndexedIntentionMatches) error {
	m := args.Match
	if m == nil {
		return errors.New("Match must be specified on args")
	}
	if m.Type != structs.IntentionMatchSource && m.Type != structs.IntentionMatchDestination {
		return fmt.Errorf("'by' parameter must be one of 'source' or 'destination'")
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, matches, err := st.IntentionMatch(ws, m.Type, m.Names)
		reply.Index, reply.Matches = idx, matches
		return err
	})
}

// intentionCheck decides whether the source may connect to the
// destination: the highest-precedence matching intention decides, an L7
// intention counts as deny (no request is known), and without one the
// server's default intention policy applies.
func (s *Server) intentionCheck(_ context.Context, args *structs.IntentionQueryRequest, reply *structs.IntentionQueryCheckResponse) error {
	c := args.Check
	if c == nil {
		return errors.New("Check must be specified on args")
	}
	if c.SourceType != "" && c.SourceType != structs.IntentionSourceConsul {
		return fmt.Errorf("unsupported SourceType: %q", c.SourceType)
	}
	_, matches, err := s.fsm.State().IntentionMatch(nil, structs.IntentionMatchDestination, []string{c.DestinationName})
	if err != nil {
		return err
	}
	if len(matches) != 1 {
		return errors.New("internal error loading matches")
	}
	d := intentions.Evaluate(matches[0], c.SourceName, c.DestinationName, s.defaultIntentionAllow(), nil)
	reply.Allowed = d.Allowed
	return nil
}

// defaultIntentionAllow is the server's default intention policy: allow
// unless configured deny.
func (s *Server) defaultIntentionAllow() bool {
	return !strings.EqualFold(s.cfg.DefaultIntentionPolicy, IntentionPolicyDeny)
}
