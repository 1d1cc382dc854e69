package structs

import (
	"encoding/hex"
	"errors"
)

// ParseUUID validates a UUID string (a node ID, an intention ID) as
// Consul's go-uuid ParseUUID does, with its error texts, which Consul
// puts in its answers ("Bad node ID: uuid string is wrong length").
func ParseUUID(id string) error {
	if len(id) != 36 {
		return errors.New("uuid string is wrong length")
	}
	if id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return errors.New("uuid is improperly formatted")
	}
	_, err := hex.DecodeString(id[0:8] + id[9:13] + id[14:18] + id[19:23] + id[24:36])
	return err
}
