package server

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// The deprecated ID-based intention API (Consul's before 1.9, still
// served): intentions created by ID are sources of the destination's
// service-intentions entry that carry a legacy ID, Meta and times. As in
// Consul, it edits an entry only while every source of it is such an
// intention; a write through the config-entry or exact API turns them all
// into config-entry intentions.

// Legacy intention errors with Consul's texts.
var (
	// ErrIntentionCreateID refuses an ID on a create: the server picks it.
	ErrIntentionCreateID = errors.New("ID must be empty when creating a new intention")
	// ErrIntentionDestinationChanged refuses an update that moves an
	// intention to another destination.
	ErrIntentionDestinationChanged = errors.New("Cannot modify Destination partition/namespace/name for an intention once it exists.")
)

// legacyEditRefused is Consul's answer to an ID-based write to an entry
// that has config-entry intentions.
func legacyEditRefused(destination string) error {
	return fmt.Errorf("cannot use legacy intention API to edit intentions with a destination of %q after editing them via a service-intentions config entry", destination)
}

// newIntentionID returns a random UUID no intention has.
func (s *Server) newIntentionID() (string, error) {
	for range 10 {
		id, err := newUUID()
		if err != nil {
			return "", err
		}
		if _, _, existing, err := s.fsm.State().IntentionGetByID(nil, id); err == nil && existing == nil {
			return id, nil
		}
	}
	return "", errors.New("could not generate a unique intention ID")
}

// legacyIntentionCreate computes the write that adds ixn (with its new ID)
// to its destination's entry, creating the entry. A source already there
// is refused by validation ("defines ... more than once").
func (s *Server) legacyIntentionCreate(ixn *structs.Intention, now time.Time) (*structs.ConfigEntryRequest, error) {
	destination := ixn.DestinationName
	prev, err := s.intentionEntry(destination)
	if err != nil {
		return nil, err
	}
	next := &structs.ServiceIntentionsConfigEntry{Kind: structs.ServiceIntentions, Name: destination}
	if prev != nil {
		if !prev.LegacyIDsAllSet() {
			return nil, legacyEditRefused(destination)
		}
		next = structs.CloneConfigEntry(prev).(*structs.ServiceIntentionsConfigEntry)
	}
	next.Sources = append(next.Sources, ixn.ToLegacySource(now, now))
	return legacyWrite(prev, next)
}

// legacyIntentionUpdate computes the write that replaces the intention
// with ixn's ID by ixn, keeping its creation time.
func (s *Server) legacyIntentionUpdate(ixn *structs.Intention, now time.Time) (*structs.ConfigEntryRequest, error) {
	_, prev, old, err := s.fsm.State().IntentionGetByID(nil, ixn.ID)
	if err != nil {
		return nil, fmt.Errorf("Intention lookup failed: %w", err)
	}
	if old == nil {
		return nil, fmt.Errorf("Cannot modify non-existent intention: '%s'", ixn.ID)
	}
	if old.DestinationName != ixn.DestinationName {
		return nil, ErrIntentionDestinationChanged
	}
	if !prev.LegacyIDsAllSet() {
		return nil, legacyEditRefused(prev.Name)
	}
	next := structs.CloneConfigEntry(prev).(*structs.ServiceIntentionsConfigEntry)
	for i, src := range next.Sources {
		if src != nil && src.LegacyID == ixn.ID {
			next.Sources[i] = ixn.ToLegacySource(old.CreatedAt, now)
		}
	}
	return legacyWrite(prev, next)
}

// legacyIntentionDelete computes the write that removes the intention with
// the given ID (deleting the entry with its last source).
func (s *Server) legacyIntentionDelete(id string) (*structs.ConfigEntryRequest, error) {
	_, prev, old, err := s.fsm.State().IntentionGetByID(nil, id)
	if err != nil {
		return nil, fmt.Errorf("Intention lookup failed: %w", err)
	}
	if old == nil {
		return nil, fmt.Errorf("Cannot delete non-existent intention: '%s'", id)
	}
	if !prev.LegacyIDsAllSet() {
		return nil, legacyEditRefused(prev.Name)
	}
	next := structs.CloneConfigEntry(prev).(*structs.ServiceIntentionsConfigEntry)
	next.Sources = slices.DeleteFunc(next.Sources, func(src *structs.SourceIntention) bool {
		return src != nil && src.LegacyID == id
	})
	if len(next.Sources) == 0 {
		return &structs.ConfigEntryRequest{Op: structs.ConfigEntryDeleteCAS, Entry: next}, nil
	}
	return legacyWrite(prev, next)
}

// legacyWrite normalizes and validates next as a legacy write and returns
// the check-and-set upsert of it over prev (nil: create).
func legacyWrite(prev, next *structs.ServiceIntentionsConfigEntry) (*structs.ConfigEntryRequest, error) {
	if err := next.LegacyNormalize(); err != nil {
		return nil, err
	}
	if err := next.LegacyValidate(); err != nil {
		return nil, err
	}
	next.ModifyIndex = 0
	if prev != nil {
		next.ModifyIndex = prev.ModifyIndex
	}
	return &structs.ConfigEntryRequest{Op: structs.ConfigEntryUpsertCAS, Entry: next}, nil
}
