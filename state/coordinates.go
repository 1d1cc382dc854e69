package state

import (
	"fmt"

	"github.com/hashicorp/go-memdb"
	"github.com/trellis-mesh/trellis/structs"
)

// Network coordinates: one row per node and network segment, written in
// batches by the leader (Coordinate.Update) and removed with their node.
// Like Consul, a coordinate is kept only for a node the catalog knows:
// an update for any other node is dropped, since deleting the node is what
// cleans its coordinates up and an agent not yet registered reports again
// a few seconds later.

const tableCoordinates = "coordinates"

func coordinatesTableSchema() *memdb.TableSchema {
	return &memdb.TableSchema{
		Name: tableCoordinates,
		Indexes: map[string]*memdb.IndexSchema{
			indexID: {Name: indexID, Unique: true, Indexer: keyIndexer(func(c *structs.Coordinate) []string {
				return []string{c.Node, c.Segment}
			})},
			indexNode: {Name: indexNode, Indexer: keyIndexer(func(c *structs.Coordinate) []string {
				return []string{c.Node}
			})},
		},
	}
}

// CoordinateBatchUpdate stores the coordinates of a batch at index idx.
// Updates without a coordinate, or for a node that is not registered,
// are skipped; the stored row takes the catalog's spelling of the node
// name.
func (s *Store) CoordinateBatchUpdate(idx uint64, updates structs.Coordinates) error {
	return s.write(idx, func(tx *writeTxn) error {
		for _, u := range updates {
			if u == nil || u.Coord == nil {
				continue
			}
			n, err := getNode(tx.Txn, u.Node)
			if err != nil {
				return err
			}
			if n == nil {
				continue
			}
			c := u.Clone()
			c.Node = n.Node
			if err := tx.Insert(tableCoordinates, c); err != nil {
				return fmt.Errorf("failed inserting coordinate: %w", err)
			}
		}
		return tx.bumpIndex(tableCoordinates)
	})
}

// Coordinates lists every stored coordinate, ordered by node and segment.
func (s *Store) Coordinates(ws memdb.WatchSet) (uint64, structs.Coordinates, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	it, err := tx.Get(tableCoordinates, indexID)
	if err != nil {
		return 0, nil, fmt.Errorf("failed coordinate lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	out := structs.Coordinates{}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Coordinate).Clone())
	}
	return maxIndex(tx, tableCoordinates), out, nil
}

// NodeCoordinates lists one node's coordinates, one per segment; empty
// when the node has reported none. Node names are case-insensitive.
func (s *Store) NodeCoordinates(ws memdb.WatchSet, node string) (uint64, structs.Coordinates, error) {
	tx := s.db.Txn(false)
	defer tx.Abort()
	out, err := coordinatesOfNode(tx, ws, node)
	if err != nil {
		return 0, nil, err
	}
	return maxIndex(tx, tableCoordinates), out, nil
}

func coordinatesOfNode(tx *memdb.Txn, ws memdb.WatchSet, node string) (structs.Coordinates, error) {
	it, err := tx.Get(tableCoordinates, indexNode, node)
	if err != nil {
		return nil, fmt.Errorf("failed coordinate lookup: %w", err)
	}
	ws.Add(it.WatchCh())
	out := structs.Coordinates{}
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Coordinate).Clone())
	}
	return out, nil
}

// deleteNodeCoordinates drops a deleted node's coordinates.
func (tx *writeTxn) deleteNodeCoordinates(node string) error {
	n, err := tx.DeleteAll(tableCoordinates, indexNode, node)
	if err != nil {
		return fmt.Errorf("failed deleting coordinates: %w", err)
	}
	if n == 0 {
		return nil
	}
	return tx.bumpIndex(tableCoordinates)
}

// Coordinates lists every stored coordinate, for the snapshot.
func (sn *Snapshot) Coordinates() (structs.Coordinates, error) {
	it, err := sn.tx.Get(tableCoordinates, indexID)
	if err != nil {
		return nil, fmt.Errorf("snapshot coordinates: %w", err)
	}
	var out structs.Coordinates
	for raw := it.Next(); raw != nil; raw = it.Next() {
		out = append(out, raw.(*structs.Coordinate).Clone())
	}
	return out, nil
}

// Coordinates restores a batch of coordinates. Their nodes must have been
// restored first; a coordinate whose node is missing is dropped, as a
// live update for it would be. The table's index comes from the Index
// records.
func (r *Restore) Coordinates(cs structs.Coordinates) error {
	for _, c := range cs {
		if c == nil || c.Coord == nil {
			continue
		}
		n, err := getNode(r.tx, c.Node)
		if err != nil {
			return err
		}
		if n == nil {
			continue
		}
		if err := r.tx.Insert(tableCoordinates, c.Clone()); err != nil {
			return fmt.Errorf("restore coordinate %q: %w", c.Node, err)
		}
	}
	return nil
}
