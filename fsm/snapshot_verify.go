package fsm

import (
	"bufio"
	"io"

	"github.com/trellis-mesh/trellis/state"
)

// RecordCount is how many records of one type a snapshot stream holds.
type RecordCount struct {
	// Type names the record type (Node, Service, KV, ...).
	Type  string
	Count int
}

// recordNames names every record type, for operators reading a
// snapshot's contents (`trellis snapshot inspect`).
func recordNames() map[recordType]string {
	return map[recordType]string{
		recordNode:           "Node",
		recordService:        "Service",
		recordCheck:          "Check",
		recordKV:             "KV",
		recordTombstone:      "Tombstone",
		recordSession:        "Session",
		recordIndex:          "Index",
		recordConfigEntry:    "ConfigEntry",
		recordCAConfig:       "CAConfig",
		recordCARoot:         "CARoot",
		recordCASerial:       "CASerial",
		recordAppliedRequest: "AppliedRequest",
		recordPreparedQuery:  "PreparedQuery",
	}
}

// Verify reads a whole snapshot stream exactly as Restore does, into a
// store it then drops, and returns its record counts by type in the order
// the records first appear. A nil error means Restore would accept the
// same bytes: a server checks a user's snapshot with it before handing the
// snapshot to Raft, whose restore cannot fail half-way without stopping
// the server.
func (f *FSM) Verify(r io.Reader) ([]RecordCount, error) {
	names := recordNames()
	var counts []RecordCount
	at := make(map[recordType]int)
	err := f.restoreInto(state.NewStore(), bufio.NewReader(r), func(t recordType) {
		i, ok := at[t]
		if !ok {
			i = len(counts)
			at[t] = i
			counts = append(counts, RecordCount{Type: names[t]})
		}
		counts[i].Count++
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}
