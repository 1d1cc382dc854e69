package server

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/ca"
	"github.com/trellis-mesh/trellis/state"
	"github.com/trellis-mesh/trellis/state/query"
	"github.com/trellis-mesh/trellis/structs"
)

// requireConnect answers a CA method with ErrConnectNotEnabled when the
// server runs with Connect off, as Consul's CA endpoints do.
func requireConnect[A, R any](s *Server, fn func(context.Context, *A, *R) error) func(context.Context, *A, *R) error {
	return func(ctx context.Context, a *A, r *R) error {
		if s.cfg.Connect.Disabled {
			return structs.ErrConnectNotEnabled
		}
		return fn(ctx, a, r)
	}
}

// connectCARoots lists the trusted roots (blocking on the roots table).
// Roots carry no key material: keys live in their own table.
func (s *Server) connectCARoots(ctx context.Context, args *structs.DCSpecificRequest, reply *structs.IndexedCARoots) error {
	return s.blockingQuery(ctx, &args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, st *state.Store) error {
		r, err := query.CARoots(ws, st)
		if err != nil {
			return err
		}
		*reply = *r
		return nil
	})
}

// connectCAConfigurationGet reads the CA configuration, with any
// operator-supplied private key redacted.
func (s *Server) connectCAConfigurationGet(_ context.Context, _ *structs.DCSpecificRequest, reply *structs.CAConfiguration) error {
	_, cfg, err := s.fsm.State().CAConfig(nil)
	if err != nil {
		return err
	}
	if cfg == nil {
		return structs.ErrCANotInitialized
	}
	redactConfig(cfg)
	*reply = *cfg
	return nil
}

// connectCAConfigurationSet applies a new CA configuration on the leader,
// following Consul's UpdateConfiguration: the cluster ID and provider
// State cannot change; an identical configuration is a no-op; a change
// that keeps the CA key (TTLs, rate limits) only replaces the
// configuration; a new key (supplied, or a new key type or size) rotates
// the root.
func (s *Server) connectCAConfigurationSet(_ context.Context, args *structs.CARequest, _ *struct{}) error {
	if args.Config == nil {
		return fmt.Errorf("%w: no CA configuration given", ca.ErrInvalidConfig)
	}
	c := &s.connectCA
	c.admin.Lock()
	defer c.admin.Unlock()

	st := s.fsm.State()
	_, current, err := st.CAConfig(nil)
	if err != nil {
		return err
	}
	if current == nil {
		return structs.ErrCANotInitialized
	}
	if len(args.Config.State) > 0 && !reflect.DeepEqual(args.Config.State, current.State) {
		return structs.ErrCAStateReadOnly
	}
	next := &structs.CAConfiguration{
		ClusterID:                current.ClusterID,
		Provider:                 args.Config.Provider,
		Config:                   copyConfigMap(args.Config.Config),
		State:                    current.State,
		ForceWithoutCrossSigning: args.Config.ForceWithoutCrossSigning,
	}
	unredactConfig(next, current)
	if ps := ca.ProviderState(next.Config); ps != nil {
		next.State = ps
	}
	if next.Provider == current.Provider && sameConfigMap(next.Config, current.Config) {
		return nil
	}
	if next.Provider != structs.ConsulCAProvider {
		return fmt.Errorf("could not initialize provider: unknown CA provider %q", next.Provider)
	}
	parsed, err := ca.ParseConfig(next.Config)
	if err != nil {
		return fmt.Errorf("error configuring provider: %w", err)
	}
	if cur, err := ca.ParseConfig(current.Config); err == nil && ca.SameKey(cur, parsed) && current.Provider == next.Provider {
		_, err := s.raftApply(structs.ConnectCARequestType, &structs.CARequest{Op: structs.CAOpSetConfig, Config: next})
		if err == nil {
			s.logger.Info("CA provider config updated")
		}
		return err
	}
	return s.rotateCA(st, next, parsed)
}

// rotateCA makes a new root from the configuration's key (generated or
// supplied), cross-signs it with the active root's key, and commits the
// new roots list (old root inactive, still trusted) with the new
// configuration in one check-and-set Raft write. The caller holds
// connectCA.admin. With no active root it simply creates one (bootstrap).
func (s *Server) rotateCA(st *state.Store, cfg *structs.CAConfiguration, parsed *ca.Config) error {
	idx, roots, err := st.CARoots(nil)
	if err != nil {
		return err
	}
	active := roots.Active()
	casIndex := idx
	if len(roots) == 0 {
		casIndex = 0
	}
	// keyPEM is the new root's key as it is replicated: the supplied one,
	// or the one generated below.
	key, keyPEM := parsed.PrivateKey, parsed.PrivateKey
	var rootPEM string
	block, err := s.reserveSerials(2)
	if err != nil {
		return err
	}
	if key != "" {
		k, err := ca.ParseSigner(key)
		if err != nil {
			return fmt.Errorf("error configuring provider: %w", err)
		}
		if parsed.RootCert != "" {
			if err := ca.ValidateSuppliedRoot(parsed.RootCert, k); err != nil {
				return fmt.Errorf("error configuring provider: %w", err)
			}
			rootPEM = parsed.RootCert
		} else if rootPEM, err = ca.NewRootCert(ca.RootRequest{ClusterID: cfg.ClusterID, Key: k, Serial: block.First, TTL: parsed.RootCertTTL}); err != nil {
			return err
		}
	} else {
		k, pemKey, err := ca.GenerateKey(parsed.PrivateKeyType, parsed.PrivateKeyBits)
		if err != nil {
			return fmt.Errorf("error generating CA root certificate: %w", err)
		}
		keyPEM = pemKey
		if rootPEM, err = ca.NewRootCert(ca.RootRequest{ClusterID: cfg.ClusterID, Key: k, Serial: block.First, TTL: parsed.RootCertTTL}); err != nil {
			return err
		}
	}
	newRoot, err := ca.NewCARoot(rootPEM, cfg.ClusterID)
	if err != nil {
		return err
	}
	if active != nil && active.ID == newRoot.ID {
		// The supplied key and certificate are the active root already.
		_, err := s.raftApply(structs.ConnectCARequestType, &structs.CARequest{Op: structs.CAOpSetConfig, Config: cfg})
		return err
	}
	now := time.Now()
	if active != nil && !cfg.ForceWithoutCrossSigning {
		oldCA, err := authorityFor(st, active)
		if err != nil {
			return err
		}
		newCert, err := ca.ParseCert(rootPEM)
		if err != nil {
			return err
		}
		xc, err := oldCA.CrossSign(newCert, block.First+1, now, now.Add(max(ca.MinCrossSignTTL, 2*parsed.LeafCertTTL)))
		if err != nil {
			return err
		}
		// Leaves of the new root carry this, so peers that have not yet
		// seen the new root still accept them.
		newRoot.IntermediateCerts = []string{xc}
	}
	next := make(structs.CARoots, 0, len(roots)+1)
	for _, r := range roots {
		if r.Active {
			r.Active = false
			r.RotatedOutAt = now
		}
		next = append(next, r)
	}
	next = append(next, newRoot)
	resp, err := s.raftApply(structs.ConnectCARequestType, &structs.CARequest{
		Op:          structs.CAOpSetRootsAndConfig,
		Index:       casIndex,
		Roots:       next,
		SigningKeys: []*structs.CASigningKey{{RootID: newRoot.ID, PrivateKey: keyPEM}},
		Config:      cfg,
	})
	if err != nil {
		return err
	}
	if ok, _ := resp.(bool); !ok {
		return ErrCARootsChanged
	}
	if active != nil {
		s.logger.Info("CA rotated to new root", "old", active.ID, "new", newRoot.ID, "key", fmt.Sprintf("%s-%d", newRoot.PrivateKeyType, newRoot.PrivateKeyBits))
	} else {
		s.logger.Info("CA initialized", "root", newRoot.ID, "trust_domain", connect.TrustDomain(cfg.ClusterID))
	}
	return nil
}

// connectCASign signs a service's CSR on the leader: the CSR must name a
// service of this cluster's trust domain and datacenter; the request queues
// for the rate limiter (or, with csr_max_concurrent, for a signing slot)
// and fails with ErrRateLimited when the queue is full (see csrQueueWait).
func (s *Server) connectCASign(ctx context.Context, args *structs.CASignRequest, reply *structs.IssuedCert) error {
	csr, err := ca.ParseCSR(args.CSR)
	if err != nil {
		return err
	}
	var svc *connect.SpiffeIDService
	signed, err := s.signCSR(ctx, csr, func(signing *connect.SpiffeIDSigning) (err error) {
		svc, err = ca.ValidateLeafCSR(csr, signing, s.cfg.Datacenter)
		return err
	})
	if err != nil {
		return err
	}
	issued := ca.IssuedCert(signed.chain, signed.leaf, svc)
	issued.CreateIndex, issued.ModifyIndex = signed.index, signed.index
	*reply = *issued
	return nil
}

// signedCSR is a leaf the active root signed: the chain PEM, the parsed
// leaf and the Raft index of its serial.
type signedCSR struct {
	chain string
	leaf  *x509.Certificate
	index uint64
}

// signCSR signs csr with the active root after validate accepted it for
// the cluster's signing identity, under the CSR rate limit, with the next
// serial (ConnectCA.Sign and AutoEncrypt.Sign alike).
func (s *Server) signCSR(ctx context.Context, csr *x509.CertificateRequest, validate func(*connect.SpiffeIDSigning) error) (*signedCSR, error) {
	st := s.fsm.State()
	_, cfg, err := st.CAConfig(nil)
	if err != nil {
		return nil, err
	}
	if cfg == nil {
		return nil, structs.ErrCANotInitialized
	}
	parsed, err := s.connectCA.config(cfg)
	if err != nil {
		return nil, err
	}
	if err := validate(connect.NewSigningID(cfg.ClusterID)); err != nil {
		return nil, err
	}
	// As in Consul, csr_max_concurrent, when set, replaces the rate limit:
	// it bounds the leader's cores busy signing without slowing a burst
	// below what they can sign.
	if limit := parsed.CSRMaxConcurrent; limit > 0 {
		if !s.connectCA.slots.acquire(ctx, limit, csrQueueWait) {
			return nil, structs.ErrRateLimited
		}
		defer s.connectCA.slots.release(limit)
	} else if rate := s.csrRate(parsed); rate > 0 && !s.connectCA.limiter.wait(ctx, rate, csrQueueWait) {
		return nil, structs.ErrRateLimited
	}
	authority, root, err := s.connectCA.activeAuthority(st)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	if root.NotAfter.Before(now) {
		return nil, fmt.Errorf("root expired: certificate expired, expiration date: %s", root.NotAfter)
	}
	serial, index, err := s.nextSerial()
	if err != nil {
		return nil, err
	}
	chain, leaf, err := authority.SignLeaf(csr, serial, parsed.LeafCertTTL, now)
	if err != nil {
		return nil, err
	}
	return &signedCSR{chain: chain, leaf: leaf, index: index}, nil
}

// copyConfigMap copies a configuration map one level deep (values are
// scalars).
func copyConfigMap(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return nil
	}
	out := make(map[string]interface{}, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// sameConfigMap compares two configuration maps as JSON would show them,
// so that 256 read back from msgpack (int64) equals 256 sent as JSON
// (float64).
func sameConfigMap(a, b map[string]interface{}) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return errA == nil && errB == nil && string(ja) == string(jb)
}
