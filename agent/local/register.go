package local

import (
	"fmt"
	"slices"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Writes: registration and removal of services and checks. Each write is
// persisted first (and undone on failure), then applied in memory, then
// announced (watchers, Notify channels, alias checks, the syncer).

// RegisterResult is what RegisterService stored: copies of the service,
// its sidecar (nil when none) and every check of both, with the statuses
// they have now (a re-registered check keeps its current status). Start
// (or restart) a runner for each check with a Type, and stop the runners
// of RemovedChecks.
type RegisterResult struct {
	Service       *structs.NodeService
	Sidecar       *structs.NodeService
	Checks        []LocalCheck
	RemovedChecks []string
}

// RegisterService validates and expands def (ExpandService) against the
// services registered now and stores the result, parent and sidecar
// together or not at all: the body of PUT /v1/agent/service/register.
// replaceExistingChecks removes the service's (and sidecar's) checks that
// the new definition no longer has; otherwise they stay. Errors: a
// *ValidationError (ErrInvalid, HTTP 400), ErrNoSidecarPort, ErrPersist.
func (s *State) RegisterService(def *structs.ServiceDefinition, token string, replaceExistingChecks bool) (*RegisterResult, error) {
	return s.registerService(def, token, replaceExistingChecks, true)
}

// RegisterConfigService registers a service definition read from the
// agent's config files, replacing its checks. Nothing is written to the
// data dir: the config files, read again at every start and reload, are
// the service's record. Files that an HTTP registration of the same
// service (or sidecar, or check) left there are removed, as Consul purges
// them, so that the config wins and a service later dropped from the
// config does not come back from the data dir.
func (s *State) RegisterConfigService(def *structs.ServiceDefinition, token string) (*RegisterResult, error) {
	return s.registerService(def, token, true, false)
}

func (s *State) registerService(def *structs.ServiceDefinition, token string, replaceExistingChecks, persist bool) (*RegisterResult, error) {
	if err := s.scriptsAllowed(def.AllChecks(), persist); err != nil {
		return nil, err
	}
	if sc := def.Connect; sc != nil && sc.SidecarService != nil {
		if err := s.scriptsAllowed(sc.SidecarService.AllChecks(), persist); err != nil {
			return nil, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, err := ExpandService(def, s.expandOptionsLocked())
	if err != nil {
		return nil, err
	}
	plans := []*addPlan{s.planAddLocked(exp.Service, exp.Checks, token, replaceExistingChecks)}
	if exp.Sidecar != nil {
		plans = append(plans, s.planAddLocked(exp.Sidecar, exp.SidecarChecks, token, replaceExistingChecks))
	}
	if err := s.persistPlansLocked(plans, persist); err != nil {
		return nil, err
	}
	res := &RegisterResult{}
	for i, p := range plans {
		s.commitAddLocked(p)
		if i == 0 {
			res.Service = p.svc.Clone()
		} else {
			res.Sidecar = p.svc.Clone()
		}
		for _, c := range p.checks {
			res.Checks = append(res.Checks, LocalCheck{Check: c.check.Clone(), Type: c.def.Clone()})
		}
		res.RemovedChecks = append(res.RemovedChecks, p.removed...)
	}
	return res, nil
}

func (s *State) expandOptionsLocked() ExpandOptions {
	return ExpandOptions{
		NodeName:       s.cfg.NodeName,
		SidecarMinPort: s.cfg.SidecarMinPort,
		SidecarMaxPort: s.cfg.SidecarMaxPort,
		LocalServices:  lockedServices{s},
	}
}

// AddService stores an already expanded service with its checks (from
// ExpandService, or built by the agent itself): a service that exists is
// replaced; a check that exists keeps its status and output (Consul's
// rule); replaceExistingChecks removes the service's other checks. The
// service and checks are copied; each check is bound to the service.
func (s *State) AddService(svc *structs.NodeService, checks []LocalCheck, token string, replaceExistingChecks bool) error {
	if svc == nil || svc.Service == "" {
		return invalid("Name", MsgMissingServiceName)
	}
	svc = svc.Clone()
	if svc.ID == "" {
		svc.ID = svc.Service
	}
	for _, lc := range checks {
		if lc.Check == nil || lc.Check.CheckID == "" {
			return invalid("CheckID", "CheckID missing")
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.planAddLocked(svc, checks, token, replaceExistingChecks)
	if err := s.persistPlansLocked([]*addPlan{p}, true); err != nil {
		return err
	}
	s.commitAddLocked(p)
	return nil
}

// addPlan is one service write, computed before anything changes.
type addPlan struct {
	svc    *structs.NodeService
	token  string
	checks []*checkEntry
	// removed are the service's checks to remove (replace-existing-checks);
	// retag the ones that stay and take the service's new name and tags.
	removed []string
	retag   []string
}

func (s *State) planAddLocked(svc *structs.NodeService, checks []LocalCheck, token string, replace bool) *addPlan {
	now := s.now()
	p := &addPlan{svc: svc, token: token}
	keep := make(map[string]bool, len(checks))
	for _, lc := range checks {
		h := lc.Check.Clone()
		h.Node = s.cfg.NodeName
		h.ServiceID, h.ServiceName, h.ServiceTags = svc.ID, svc.Service, slices.Clone(svc.Tags)
		if h.Status == "" {
			h.Status = structs.HealthCritical
		}
		c := &checkEntry{check: h, def: lc.Type.Clone(), token: token}
		if old := s.checks[h.CheckID]; old != nil && !old.deleted {
			h.Status, h.Output = old.check.Status, old.check.Output
			c.criticalSince = old.criticalSince
		}
		if h.Status != structs.HealthCritical {
			c.criticalSince = time.Time{}
		} else if c.criticalSince.IsZero() {
			c.criticalSince = now
		}
		keep[h.CheckID] = true
		p.checks = append(p.checks, c)
	}
	for id, c := range s.serviceChecksLocked(svc.ID) {
		if c.deleted || keep[id] {
			continue
		}
		if replace {
			p.removed = append(p.removed, id)
		} else {
			p.retag = append(p.retag, id)
		}
	}
	slices.Sort(p.removed)
	return p
}

// persistPlansLocked writes the plans' files, all or none; without
// persist it removes them instead (definitions from the config files).
func (s *State) persistPlansLocked(plans []*addPlan, persist bool) error {
	txn := s.newTxn()
	err := func() error {
		for _, p := range plans {
			if !persist {
				if err := txn.removeService(s, p.svc.ID); err != nil {
					return err
				}
			} else if err := txn.writeService(s, &serviceEntry{svc: p.svc, token: p.token}); err != nil {
				return err
			}
			for _, c := range p.checks {
				if !persist {
					if err := txn.removeCheck(s, c.check.CheckID); err != nil {
						return err
					}
				} else if err := txn.writeCheck(s, c); err != nil {
					return err
				}
			}
			for _, id := range p.removed {
				if err := txn.removeCheck(s, id); err != nil {
					return err
				}
			}
		}
		return nil
	}()
	if err != nil {
		if rerr := txn.rollback(); rerr != nil {
			s.logger.Error("failed to roll back persisted registration", "error", rerr)
		}
		return err
	}
	return nil
}

func (s *State) commitAddLocked(p *addPlan) {
	id := p.svc.ID
	e := &serviceEntry{svc: p.svc, token: p.token, version: 1}
	if old := s.services[id]; old != nil {
		e.version = old.version + 1
	}
	s.services[id] = e
	s.reindexServiceLocked(id)
	for _, c := range p.checks {
		old := s.checks[c.check.CheckID]
		if old != nil {
			c.version = old.version + 1
		}
		s.checks[c.check.CheckID] = c
		s.reindexCheckLocked(c.check.CheckID)
		if old != nil && !old.deleted && old.check.ServiceID != id {
			s.aliasLocked(old.check.ServiceID)
		}
	}
	for _, cid := range p.removed {
		s.tombstoneCheckLocked(cid)
	}
	for _, cid := range p.retag {
		c := s.checks[cid]
		if c.check.ServiceName != p.svc.Service || !slices.Equal(c.check.ServiceTags, p.svc.Tags) {
			c.check.ServiceName, c.check.ServiceTags = p.svc.Service, slices.Clone(p.svc.Tags)
			c.inSync = false
			c.version++
			s.reindexCheckLocked(cid)
		}
	}
	s.serviceChangedLocked(id)
}

// RemoveService removes a service with its checks and, when it registered
// one, its sidecar (<id>-sidecar-proxy, if LocallyRegisteredAsSidecar)
// with the sidecar's checks; the syncer then deregisters them from the
// catalog. It returns the IDs of every check removed, so that the caller
// can stop their runners. Errors: ErrServiceNotFound (Consul's 404 text),
// ErrPersist.
func (s *State) RemoveService(id string) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.services[id]
	if e == nil || e.deleted {
		return nil, unknownService(id)
	}
	ids := []string{id}
	if sc := s.services[SidecarServiceID(id)]; sc != nil && !sc.deleted && sc.svc.LocallyRegisteredAsSidecar {
		ids = append(ids, sc.svc.ID)
	}
	var checkIDs []string
	for _, sid := range ids {
		for cid, c := range s.serviceChecksLocked(sid) {
			if !c.deleted {
				checkIDs = append(checkIDs, cid)
			}
		}
	}
	slices.Sort(checkIDs)

	txn := s.newTxn()
	err := func() error {
		for _, sid := range ids {
			if err := txn.removeService(s, sid); err != nil {
				return err
			}
		}
		for _, cid := range checkIDs {
			if err := txn.removeCheck(s, cid); err != nil {
				return err
			}
		}
		return nil
	}()
	if err != nil {
		if rerr := txn.rollback(); rerr != nil {
			s.logger.Error("failed to roll back service removal", "service", id, "error", rerr)
		}
		return nil, err
	}
	for _, cid := range checkIDs {
		s.tombstoneCheckLocked(cid)
	}
	for _, sid := range ids {
		se := s.services[sid]
		se.deleted, se.inSync = true, false
		se.version++
		s.reindexServiceLocked(sid)
		s.serviceChangedLocked(sid)
	}
	return checkIDs, nil
}

func (s *State) tombstoneCheckLocked(id string) {
	c := s.checks[id]
	if c == nil || c.deleted {
		return
	}
	c.deleted, c.inSync = true, false
	c.outputDue = time.Time{}
	c.version++
	s.reindexCheckLocked(id)
	s.aliasLocked(c.check.ServiceID)
	s.broadcastLocked()
	s.triggerSync()
}

// AddCheck stores a check: a node check, or a check of the local service
// check.ServiceID (which must exist: ErrServiceNotFound otherwise). def is
// how it runs (nil for a check nothing runs). A check that exists keeps
// its status and output; otherwise check.Status (default critical) is its
// initial status. Errors: ErrServiceNotFound, ErrPersist, a
// *ValidationError for a missing CheckID.
func (s *State) AddCheck(check *structs.HealthCheck, def *structs.CheckType, token string) error {
	_, err := s.addCheck(check, def, token, true)
	return err
}

// RegisterCheck is PUT /v1/agent/check/register: it validates def
// (CheckFromDefinition) and stores the check, returning its state now.
// Errors: a *ValidationError (400), ErrServiceNotFound (Consul answers
// 404 `ServiceID "x" does not exist`), ErrPersist.
func (s *State) RegisterCheck(def *structs.CheckDefinition, token string) (*CheckState, error) {
	return s.registerCheck(def, token, true)
}

// RegisterConfigCheck registers a check definition read from the agent's
// config files: like RegisterConfigService, nothing is persisted and a
// file an HTTP registration of the same check left is removed.
func (s *State) RegisterConfigCheck(def *structs.CheckDefinition, token string) (*CheckState, error) {
	return s.registerCheck(def, token, false)
}

func (s *State) registerCheck(def *structs.CheckDefinition, token string, persist bool) (*CheckState, error) {
	hc, ct, err := CheckFromDefinition(def, s.cfg.NodeName)
	if err != nil {
		return nil, err
	}
	if err := s.scriptsAllowed(structs.CheckTypes{ct}, persist); err != nil {
		return nil, err
	}
	return s.addCheck(hc, ct, token, persist)
}

// scriptsAllowed refuses script and docker checks the agent does not
// run: remote (HTTP) registrations need enable_script_checks, config file
// ones either setting, as in Consul.
func (s *State) scriptsAllowed(checks structs.CheckTypes, remote bool) error {
	for _, c := range checks {
		if c == nil || len(c.ScriptArgs) == 0 {
			continue
		}
		switch {
		case remote && !s.cfg.EnableScriptChecks:
			return invalid("ScriptArgs", MsgScriptsDisabled)
		case !remote && !s.cfg.EnableLocalScriptChecks && !s.cfg.EnableScriptChecks:
			return invalid("ScriptArgs", MsgLocalScriptsDisabled)
		}
	}
	return nil
}

func (s *State) addCheck(check *structs.HealthCheck, def *structs.CheckType, token string, persist bool) (*CheckState, error) {
	if check == nil || check.CheckID == "" {
		return nil, invalid("CheckID", "CheckID missing")
	}
	h := check.Clone()
	h.Node = s.cfg.NodeName
	if h.Status == "" {
		h.Status = structs.HealthCritical
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.ServiceID != "" {
		e := s.services[h.ServiceID]
		if e == nil || e.deleted {
			return nil, &notFoundError{sentinel: ErrServiceNotFound, msg: fmt.Sprintf("ServiceID %q does not exist", h.ServiceID)}
		}
		h.ServiceName, h.ServiceTags = e.svc.Service, slices.Clone(e.svc.Tags)
	} else {
		h.ServiceName, h.ServiceTags = "", nil
	}
	c := &checkEntry{check: h, def: def.Clone(), token: token, version: 1}
	old := s.checks[h.CheckID]
	if old != nil {
		c.version = old.version + 1
		if !old.deleted {
			h.Status, h.Output = old.check.Status, old.check.Output
			c.criticalSince = old.criticalSince
		}
	}
	if h.Status != structs.HealthCritical {
		c.criticalSince = time.Time{}
	} else if c.criticalSince.IsZero() {
		c.criticalSince = s.now()
	}
	txn := s.newTxn()
	write := txn.writeCheck
	if !persist {
		write = func(s *State, c *checkEntry) error { return txn.removeCheck(s, c.check.CheckID) }
	}
	if err := write(s, c); err != nil {
		if rerr := txn.rollback(); rerr != nil {
			s.logger.Error("failed to roll back check registration", "check", h.CheckID, "error", rerr)
		}
		return nil, err
	}
	s.checks[h.CheckID] = c
	s.reindexCheckLocked(h.CheckID)
	if old != nil && !old.deleted && old.check.ServiceID != h.ServiceID {
		s.aliasLocked(old.check.ServiceID)
	}
	s.aliasLocked(h.ServiceID)
	s.broadcastLocked()
	s.triggerSync()
	return c.state(), nil
}

// RemoveCheck removes a check (the syncer then deregisters it). Errors:
// ErrCheckNotFound (Consul's 404 text), ErrPersist.
func (s *State) RemoveCheck(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.checks[id]
	if c == nil || c.deleted {
		return unknownCheck(id)
	}
	txn := s.newTxn()
	if err := txn.removeCheck(s, id); err != nil {
		if rerr := txn.rollback(); rerr != nil {
			s.logger.Error("failed to roll back check removal", "check", id, "error", rerr)
		}
		return err
	}
	s.tombstoneCheckLocked(id)
	return nil
}
