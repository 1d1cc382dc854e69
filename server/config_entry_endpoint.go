package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// ErrMissingConfigEntry refuses a config entry write without an entry.
var ErrMissingConfigEntry = errors.New("Missing config entry")

// configEntryApply upserts an entry on the leader. The entry is normalized
// and validated here (so every replica stores the same, valid bytes); its
// place in the discovery-chain graph is checked when the FSM applies it.
// Rewriting an entry exactly as stored answers true without a Raft write
// and without looking at the CAS index, as Consul does.
func (s *Server) configEntryApply(ctx context.Context, args *structs.ConfigEntryRequest, reply *bool) error {
	if args.Entry == nil {
		return ErrMissingConfigEntry
	}
	if err := args.Entry.Normalize(); err != nil {
		return err
	}
	if err := args.Entry.Validate(); err != nil {
		return err
	}
	if args.Op != structs.ConfigEntryUpsertCAS {
		args.Op = structs.ConfigEntryUpsert
	}
	_, current, err := s.fsm.State().ConfigEntry(nil, args.Entry.GetKind(), args.Entry.GetName())
	if err != nil {
		return err
	}
	if current != nil && structs.ConfigEntriesEqual(current, args.Entry) {
		*reply = true
		return nil
	}
	resp, err := s.raftApplyWrite(ctx, structs.ConfigEntryRequestType, args)
	if err != nil {
		return err
	}
	ok, _ := resp.(bool)
	*reply = ok
	return nil
}

// configEntryDelete deletes an entry on the leader. Deleting a missing
// entry succeeds (with or without CAS) without a Raft write.
func (s *Server) configEntryDelete(ctx context.Context, args *structs.ConfigEntryRequest, reply *structs.ConfigEntryDeleteResponse) error {
	if args.Entry == nil {
		return ErrMissingConfigEntry
	}
	if err := args.Entry.Normalize(); err != nil {
		return err
	}
	if args.Op != structs.ConfigEntryDeleteCAS {
		args.Op = structs.ConfigEntryDelete
	}
	_, current, err := s.fsm.State().ConfigEntry(nil, args.Entry.GetKind(), args.Entry.GetName())
	if err != nil {
		return err
	}
	if current == nil {
		reply.Deleted = true
		return nil
	}
	resp, err := s.raftApplyWrite(ctx, structs.ConfigEntryRequestType, args)
	if err != nil {
		return err
	}
	if args.Op == structs.ConfigEntryDeleteCAS {
		reply.Deleted, _ = resp.(bool)
	} else {
		reply.Deleted = true
	}
	return nil
}

// configEntryGet reads one entry (blocking). A missing entry is a reply
// without one, carrying the kind's index.
func (s *Server) configEntryGet(ctx context.Context, args *structs.ConfigEntryQuery, reply *structs.ConfigEntryResponse) error {
	if _, err := structs.MakeConfigEntry(args.Kind, args.Name); err != nil {
		return err
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, e, err := st.ConfigEntry(ws, args.Kind, args.Name)
		reply.Index, reply.Entry = idx, e
		return err
	})
}

// configEntryList lists the entries of a kind, or of every kind when the
// kind is empty (blocking).
func (s *Server) configEntryList(ctx context.Context, args *structs.ConfigEntryQuery, reply *structs.IndexedConfigEntries) error {
	if args.Kind != "" {
		if _, err := structs.MakeConfigEntry(args.Kind, ""); err != nil {
			return err
		}
	}
	keep, err := configEntryFilter(args.Kind, args.Filter)
	if err != nil {
		return err
	}
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, entries, err := st.ConfigEntriesByKind(ws, args.Kind)
		if keep != nil {
			// A new slice: entries may be the store's.
			var kept []structs.ConfigEntry
			for _, e := range entries {
				if keep(e) {
					kept = append(kept, e)
				}
			}
			entries = kept
		}
		reply.Kind, reply.Index, reply.Entries = args.Kind, idx, entries
		return err
	})
}

// exportedServicesList resolves the exported-services entry (blocking).
func (s *Server) exportedServicesList(ctx context.Context, args *structs.ExportedServicesQuery, reply *structs.IndexedExportedServices) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		idx, services, err := query.ExportedServices(ws, st)
		reply.Index, reply.Services = idx, services
		return err
	})
}

// configEntryFilter compiles a list's ?filter=, as Consul's: only
// service-defaults entries can be filtered (by their own fields); a filter
// on any other kind is refused with Consul's text. The list filters itself
// (see filtersItself): its reply holds entries of an interface type.
func configEntryFilter(kind, expr string) (func(structs.ConfigEntry) bool, error) {
	if expr == "" {
		return nil, nil
	}
	if kind != structs.ServiceDefaults {
		return nil, fmt.Errorf("filtering not supported for config entry kind=%v", kind)
	}
	f, err := structs.CompileFilterFor(expr, (*structs.ServiceConfigEntry)(nil))
	if err != nil {
		return nil, err
	}
	return func(e structs.ConfigEntry) bool {
		sd, ok := e.(*structs.ServiceConfigEntry)
		return ok && f.Evaluate(sd)
	}, nil
}
