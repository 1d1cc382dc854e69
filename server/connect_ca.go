package server

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/structs"
)

// The built-in Connect CA on the servers. Everything durable (the
// configuration with the cluster ID, the roots, their private keys, the
// serial counter) lives in the replicated state store, so any server that
// becomes leader can sign and rotate. What is kept here is only the
// leader's working state: the parsed active root and key, the block of
// serial numbers it reserved, and the signing rate and concurrency
// limiters.

// Errors of the CA endpoints. Texts are Consul's where it has one.
var (
	// ErrCARootsChanged is returned when the roots moved under a rotation
	// (another change won the check-and-set).
	ErrCARootsChanged = errors.New("could not atomically update roots and config")
)

// serialBlockSize is how many serial numbers the leader reserves with one
// Raft write: signing stays one write per block, not per certificate.
const serialBlockSize = 128

// defaultCSRMaxPerSecond is the signing rate limit when neither the server
// configuration nor the CA configuration sets one.
const defaultCSRMaxPerSecond = ca.DefaultCSRMaxPerSecond

// redactedPrefix replaces an operator-supplied CA private key in every
// configuration read: reads never show key material. A write that sends
// the placeholder back (a read-modify-write) keeps the stored key.
const redactedPrefix = "redacted:sha256:"

// connectCA is the leader's CA working state. The zero value is ready.
type connectCA struct {
	// admin serialises the leader's CA changes: bootstrap, configuration
	// updates and pruning.
	admin sync.Mutex

	mu sync.Mutex
	// authority signs for the active root; nil until first needed or
	// after a rotation. Guarded by mu.
	authority *ca.Authority
	// parsed caches the parsed configuration of parsedIndex. Guarded by
	// mu.
	parsed      *ca.Config
	parsedIndex uint64

	// serialMu guards the serial block, and is held while a new block is
	// reserved so that concurrent signers wait for one reservation.
	serialMu sync.Mutex
	// serialNext..serialEnd-1 are reserved serials not used yet, reserved
	// at Raft index serialIndex.
	serialNext, serialEnd, serialIndex uint64

	limiter tokenBucket
	slots   csrSlots
}

// resetSerials drops the reserved serial block: a new term starts from a
// fresh reservation, so a store restored from an older snapshot can never
// make a serial repeat.
func (c *connectCA) resetSerials() {
	c.serialMu.Lock()
	defer c.serialMu.Unlock()
	c.serialNext, c.serialEnd = 0, 0
}

// config returns the parsed CA configuration cfg (cached by its index).
func (c *connectCA) config(cfg *structs.CAConfiguration) (*ca.Config, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.parsed != nil && c.parsedIndex == cfg.ModifyIndex {
		return c.parsed, nil
	}
	p, err := ca.ParseConfig(cfg.Config)
	if err != nil {
		return nil, err
	}
	c.parsed, c.parsedIndex = p, cfg.ModifyIndex
	return p, nil
}

// activeAuthority returns the authority of the store's active root,
// loading its key when the active root changed.
func (c *connectCA) activeAuthority(st *state.Store) (*ca.Authority, *structs.CARoot, error) {
	_, root, err := st.CARootActive(nil)
	if err != nil {
		return nil, nil, err
	}
	if root == nil {
		return nil, nil, structs.ErrCANotInitialized
	}
	c.mu.Lock()
	a := c.authority
	c.mu.Unlock()
	if a != nil && a.RootID() == root.ID {
		return a, root, nil
	}
	a, err = authorityFor(st, root)
	if err != nil {
		return nil, nil, err
	}
	c.mu.Lock()
	c.authority = a
	c.mu.Unlock()
	return a, root, nil
}

// authorityFor pairs a root with its replicated key.
func authorityFor(st *state.Store, root *structs.CARoot) (*ca.Authority, error) {
	key, err := st.CASigningKey(root.ID)
	if err != nil {
		return nil, err
	}
	if key == nil {
		return nil, fmt.Errorf("%w: no signing key for root %s", structs.ErrCANotInitialized, root.ID)
	}
	return ca.NewAuthority(root, key.PrivateKey)
}

// nextSerial hands out one serial from the reserved block, reserving a new
// block through Raft when it is used up. It returns the serial and the
// Raft index of its reservation (the issued certificate's index).
func (s *Server) nextSerial() (uint64, uint64, error) {
	c := &s.connectCA
	c.serialMu.Lock()
	defer c.serialMu.Unlock()
	if c.serialNext >= c.serialEnd {
		block, err := s.reserveSerials(serialBlockSize)
		if err != nil {
			return 0, 0, err
		}
		c.serialNext, c.serialEnd, c.serialIndex = block.First, block.First+block.Count, block.Index
	}
	n := c.serialNext
	c.serialNext++
	return n, c.serialIndex, nil
}

// reserveSerials commits a reservation of count serials.
func (s *Server) reserveSerials(count uint64) (*structs.CASerialBlock, error) {
	resp, err := s.raftApply(structs.ConnectCALeafRequestType, &structs.CALeafRequest{Op: structs.CALeafOpReserveSerials, Count: count})
	if err != nil {
		return nil, err
	}
	block, ok := resp.(*structs.CASerialBlock)
	if !ok {
		return nil, fmt.Errorf("unexpected serial reservation response %T", resp)
	}
	return block, nil
}

// csrRate is the signing limit in force: the CA configuration's
// CSRMaxPerSecond when it sets one (0 disables, as in Consul), otherwise
// the server's CSRMaxPerSecond (0 means the default, negative disables).
func (s *Server) csrRate(p *ca.Config) float64 {
	if p.CSRMaxPerSecondSet {
		return p.CSRMaxPerSecond
	}
	switch r := s.cfg.CSRMaxPerSecond; {
	case r < 0:
		return 0
	case r == 0:
		return defaultCSRMaxPerSecond
	default:
		return r
	}
}

// redactConfig hides an operator-supplied private key in a configuration
// about to be returned by a read.
func redactConfig(cfg *structs.CAConfiguration) {
	for k, v := range cfg.Config {
		if strings.EqualFold(strings.ReplaceAll(k, "_", ""), "privatekey") {
			if key, ok := v.(string); ok && key != "" {
				cfg.Config[k] = redactedKey(key)
			}
		}
	}
}

func redactedKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return redactedPrefix + hex.EncodeToString(sum[:])
}

// unredactConfig puts the stored private key back into a configuration a
// client wrote back with the placeholder a read gave it.
func unredactConfig(in, stored *structs.CAConfiguration) {
	var storedKey string
	for k, v := range stored.Config {
		if strings.EqualFold(strings.ReplaceAll(k, "_", ""), "privatekey") {
			storedKey, _ = v.(string)
		}
	}
	for k, v := range in.Config {
		if s, ok := v.(string); ok && strings.HasPrefix(s, redactedPrefix) && storedKey != "" && s == redactedKey(storedKey) {
			in.Config[k] = storedKey
		}
	}
}

// newClusterID returns a random UUID (version 4) for a new cluster.
func newClusterID() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("cluster id: %w", err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32], nil
}
