package server

import (
	"bytes"
	"testing"

	"github.com/trellis-mesh/trellis/structs"
)

// TestRaftCommandsLeaveTheTokenOut: a config-entry write, whose own
// encoding carries the caller's token for the RPC, becomes a Raft command
// without it, and the handler's request keeps it.
func TestRaftCommandsLeaveTheTokenOut(t *testing.T) {
	s := &Server{codec: structs.NewCodec()}
	req := &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsert,
		Entry:        &structs.ServiceConfigEntry{Kind: structs.ServiceDefaults, Name: "web"},
		WriteRequest: structs.WriteRequest{Datacenter: "dc1", Token: "secret-token"}}
	buf, err := s.encodeCommand(structs.ConfigEntryRequestType, req)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(buf, []byte("secret-token")) {
		t.Fatal("the Raft command holds the token")
	}
	if req.Token != "secret-token" {
		t.Fatalf("request token %q after encoding", req.Token)
	}
}
