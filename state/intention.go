package state

import (
	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/structs"
)

// Intentions are the sources of service-intentions config entries; these
// reads flatten the entries into Consul's intention view. Every result is
// a fresh copy, sorted by precedence (highest first), and carries the index
// of the last change to any service-intentions entry.

// Intentions lists every intention.
func (s *Store) Intentions(ws memdb.WatchSet) (uint64, structs.Intentions, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	entries, err := configEntriesTxn(tx, ws, structs.ServiceIntentions)
	if err != nil {
		return 0, nil, err
	}
	out := structs.Intentions{}
	for _, e := range entries {
		out = append(out, intentionsOf(e)...)
	}
	structs.SortIntentions(out)
	return intentionsIndex(tx), out, nil
}

// IntentionGetExact returns the intention from source to destination (both
// exact names or "*"), or nil.
func (s *Store) IntentionGetExact(ws memdb.WatchSet, source, destination string) (uint64, *structs.Intention, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	e, err := configEntryTxn(tx, ws, structs.ServiceIntentions, destination)
	if err != nil {
		return 0, nil, err
	}
	idx := intentionsIndex(tx)
	if e == nil {
		return idx, nil, nil
	}
	entry := e.(*structs.ServiceIntentionsConfigEntry)
	src := entry.FindSource(source)
	if src == nil {
		return idx, nil, nil
	}
	return idx, structs.CloneIntention(entry.ToIntention(src)), nil
}

// IntentionGetByID returns the legacy intention with the given ID (a copy)
// and the stored entry that holds it (not to be modified), or nils.
func (s *Store) IntentionGetByID(ws memdb.WatchSet, id string) (uint64, *structs.ServiceIntentionsConfigEntry, *structs.Intention, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	entries, err := configEntriesTxn(tx, ws, structs.ServiceIntentions)
	if err != nil {
		return 0, nil, nil, err
	}
	idx := intentionsIndex(tx)
	for _, e := range entries {
		entry := e.(*structs.ServiceIntentionsConfigEntry)
		if src := entry.FindLegacySource(id); src != nil {
			return idx, entry, structs.CloneIntention(entry.ToIntention(src)), nil
		}
	}
	return idx, nil, nil, nil
}

// IntentionMatch returns, for each name in order, the intentions that
// apply to it as a destination (its own entry and the "*" entry) or as a
// source (sources named so or "*" in every entry), by precedence.
func (s *Store) IntentionMatch(ws memdb.WatchSet, by structs.IntentionMatchType, names []string) (uint64, []structs.Intentions, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	out := make([]structs.Intentions, 0, len(names))
	var all []structs.ConfigEntry
	if by == structs.IntentionMatchSource {
		var err error
		if all, err = configEntriesTxn(tx, ws, structs.ServiceIntentions); err != nil {
			return 0, nil, err
		}
	}
	for _, name := range names {
		matches := structs.Intentions{}
		switch by {
		case structs.IntentionMatchDestination:
			for _, dst := range uniqueNames(name, structs.WildcardSpecifier) {
				e, err := configEntryTxn(tx, ws, structs.ServiceIntentions, dst)
				if err != nil {
					return 0, nil, err
				}
				if e != nil {
					matches = append(matches, intentionsOf(e)...)
				}
			}
		default:
			for _, e := range all {
				entry := e.(*structs.ServiceIntentionsConfigEntry)
				for _, src := range entry.Sources {
					if src != nil && (src.Name == name || src.Name == structs.WildcardSpecifier) {
						matches = append(matches, structs.CloneIntention(entry.ToIntention(src)))
					}
				}
			}
		}
		structs.SortIntentions(matches)
		out = append(out, matches)
	}
	return intentionsIndex(tx), out, nil
}

// intentionsOf flattens one stored entry into copies of its intentions.
func intentionsOf(e structs.ConfigEntry) structs.Intentions {
	entry := e.(*structs.ServiceIntentionsConfigEntry)
	ixns := entry.ToIntentions()
	for i, x := range ixns {
		ixns[i] = structs.CloneIntention(x)
	}
	return ixns
}

func intentionsIndex(tx *memdb.Txn) uint64 {
	return maxIndex(tx, configEntryKindIndexKey(structs.ServiceIntentions))
}

func uniqueNames(names ...string) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range names {
		if !seen[n] {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}
