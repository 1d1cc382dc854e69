package local

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// Persistence under the data dir, in Consul's layout:
//
//	<data-dir>/services/<sha256(service ID)>      {Token, Service, Source, LocallyRegisteredAsSidecar}
//	<data-dir>/checks/<sha256(check ID)>          {Check, ChkType, Token, Source}
//	<data-dir>/checks/state/<sha256(check ID)>    {CheckID, Status, Output, Expires} (TTL checks)
//
// Definitions are written atomically (temp file, fsync, rename) before the
// in-memory state changes, and removed on deregistration; TTL results are
// written without fsync (they change often and are only a hint: losing
// one makes the check start critical).

const (
	servicesDir   = "services"
	checksDir     = "checks"
	checkStateDir = "checks/state"
	// sourceRemote is Consul's marker for definitions registered through
	// the HTTP API (as opposed to config files).
	sourceRemote = "remote"
	tmpSuffix    = ".tmp"
)

type persistedService struct {
	Token   string
	Service *structs.NodeService
	Source  string
	// LocallyRegisteredAsSidecar is kept here because NodeService leaves
	// it out of JSON; without it a restarted agent would not remove the
	// sidecar with its parent.
	LocallyRegisteredAsSidecar bool `json:",omitempty"`
}

type persistedCheck struct {
	Check   *structs.HealthCheck
	ChkType *structs.CheckType
	Token   string
	Source  string
}

type persistedCheckState struct {
	CheckID string
	Status  string
	Output  string
	// Expires is when the TTL runs out (Unix seconds); a state read after
	// that is discarded.
	Expires int64
}

// fileName is the name of an ID's file: the SHA-256 of the ID, hex, as
// Consul names them (IDs may contain anything, file names may not).
func fileName(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

func (s *State) servicePath(id string) string {
	return filepath.Join(s.cfg.DataDir, servicesDir, fileName(id))
}

func (s *State) checkPath(id string) string {
	return filepath.Join(s.cfg.DataDir, checksDir, fileName(id))
}

func (s *State) checkStatePath(id string) string {
	return filepath.Join(s.cfg.DataDir, checkStateDir, fileName(id))
}

// fileTxn applies file writes and removals that can be undone, so that a
// registration that fails halfway leaves the data dir as it was. A nil
// *fileTxn (no data dir) does nothing.
type fileTxn struct {
	undo []func() error
}

func (s *State) newTxn() *fileTxn {
	if s.cfg.DataDir == "" {
		return nil
	}
	return &fileTxn{}
}

// restoreFunc puts back what path holds now (or removes what will be
// written there, when it holds nothing).
func restoreFunc(path string) (func() error, error) {
	old, err := os.ReadFile(path) //nolint:gosec // a file of the agent's own data dir
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return func() error {
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return nil
		}, nil
	case err != nil:
		return nil, err
	}
	return func() error { return writeFileAtomic(path, old, true) }, nil
}

func (t *fileTxn) writeJSON(path string, v any) error {
	if t == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("%w: encode %s: %w", ErrPersist, path, err)
	}
	undo, err := restoreFunc(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPersist, err)
	}
	if err := writeFileAtomic(path, data, true); err != nil {
		return fmt.Errorf("%w: %w", ErrPersist, err)
	}
	t.undo = append(t.undo, undo)
	return nil
}

func (t *fileTxn) remove(path string) error {
	if t == nil {
		return nil
	}
	undo, err := restoreFunc(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrPersist, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%w: %w", ErrPersist, err)
	}
	t.undo = append(t.undo, undo)
	return nil
}

// rollback undoes every applied step, newest first.
func (t *fileTxn) rollback() error {
	if t == nil {
		return nil
	}
	var errs []error
	for i := len(t.undo) - 1; i >= 0; i-- {
		errs = append(errs, t.undo[i]())
	}
	t.undo = nil
	return errors.Join(errs...)
}

// writeFileAtomic writes data to a temp file in path's directory and
// renames it over path, so that a crash leaves the old or the new file,
// never half of one. sync also fsyncs the file first.
func writeFileAtomic(path string, data []byte, sync bool) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, filepath.Base(path)+"-*"+tmpSuffix)
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil && sync {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func (t *fileTxn) writeService(s *State, e *serviceEntry) error {
	return t.writeJSON(s.servicePath(e.svc.ID), persistedService{
		Token: e.token, Service: e.svc, Source: sourceRemote,
		LocallyRegisteredAsSidecar: e.svc.LocallyRegisteredAsSidecar,
	})
}

func (t *fileTxn) writeCheck(s *State, c *checkEntry) error {
	return t.writeJSON(s.checkPath(c.check.CheckID), persistedCheck{
		Check: c.check, ChkType: c.def, Token: c.token, Source: sourceRemote,
	})
}

func (t *fileTxn) removeService(s *State, id string) error {
	return t.remove(s.servicePath(id))
}

func (t *fileTxn) removeCheck(s *State, id string) error {
	if err := t.remove(s.checkPath(id)); err != nil {
		return err
	}
	return t.remove(s.checkStatePath(id))
}

// persistCheckStateLocked records a TTL check's result. Failures are only
// logged: the result is already in memory and the file is a hint.
func (s *State) persistCheckStateLocked(id, status, output string, expires time.Time) {
	if s.cfg.DataDir == "" {
		return
	}
	data, err := json.Marshal(persistedCheckState{CheckID: id, Status: status, Output: output, Expires: expires.Unix()})
	if err == nil {
		err = writeFileAtomic(s.checkStatePath(id), data, false)
	}
	if err != nil {
		s.logger.Warn("failed to persist check state", "check", id, "error", err)
	}
}

// loadCheckState returns the persisted TTL result of a check, if any and
// not expired; an expired or unreadable one is removed.
func (s *State) loadCheckState(id string) (*persistedCheckState, bool) {
	path := s.checkStatePath(id)
	data, err := os.ReadFile(path) //nolint:gosec // a file of the agent's own data dir
	if err != nil {
		return nil, false
	}
	var p persistedCheckState
	if err := json.Unmarshal(data, &p); err != nil || p.CheckID != id || s.now().Unix() >= p.Expires {
		_ = os.Remove(path)
		return nil, false
	}
	return &p, true
}

// Load restores the services and checks persisted under the data dir
// (nothing in dev mode). Call it once, before anything is registered and
// before the syncer starts. Restored checks start critical (Consul's rule:
// nothing unverified is passing), except TTL checks whose last result has
// not expired yet. Unreadable files are skipped and logged; a check of a
// service that is not there is purged. Start the check runners afterwards
// from CheckStates.
func (s *State) Load() error {
	if s.cfg.DataDir == "" {
		return nil
	}
	services, err := readDir[persistedService](s, servicesDir)
	if err != nil {
		return err
	}
	checks, err := readDir[persistedCheck](s, checksDir)
	if err != nil {
		return err
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range services {
		svc := p.Service
		if svc == nil || svc.ID == "" || svc.Service == "" {
			s.logger.Warn("ignoring invalid persisted service")
			continue
		}
		if e := s.services[svc.ID]; e != nil && !e.deleted {
			continue
		}
		svc.LocallyRegisteredAsSidecar = p.LocallyRegisteredAsSidecar
		s.services[svc.ID] = &serviceEntry{svc: svc, token: p.Token, version: 1}
		s.reindexServiceLocked(svc.ID)
		s.serviceChangedLocked(svc.ID)
	}
	now := s.now()
	for _, p := range checks {
		h := p.Check
		if h == nil || h.CheckID == "" {
			s.logger.Warn("ignoring invalid persisted check")
			continue
		}
		if c := s.checks[h.CheckID]; c != nil && !c.deleted {
			continue
		}
		h.Node = s.cfg.NodeName
		if h.ServiceID != "" {
			e := s.services[h.ServiceID]
			if e == nil || e.deleted {
				s.logger.Warn("purging persisted check of a missing service", "check", h.CheckID, "service", h.ServiceID)
				_ = os.Remove(s.checkPath(h.CheckID))
				_ = os.Remove(s.checkStatePath(h.CheckID))
				continue
			}
			h.ServiceName, h.ServiceTags = e.svc.Service, slices.Clone(e.svc.Tags)
		}
		h.Status, h.Output = structs.HealthCritical, ""
		if p.ChkType != nil && p.ChkType.IsTTL() {
			if st, ok := s.loadCheckState(h.CheckID); ok && validStatus(st.Status) {
				h.Status, h.Output = st.Status, st.Output
			}
		}
		c := &checkEntry{check: h, def: p.ChkType, token: p.Token, version: 1}
		if h.Status == structs.HealthCritical {
			c.criticalSince = now
		}
		s.checks[h.CheckID] = c
		s.reindexCheckLocked(h.CheckID)
		s.aliasLocked(h.ServiceID)
	}
	s.broadcastLocked()
	s.triggerSync()
	return nil
}

// readDir decodes every definition file of one data-dir subdirectory,
// skipping directories and leftover temp files.
func readDir[T any](s *State, sub string) ([]*T, error) {
	dir := filepath.Join(s.cfg.DataDir, sub)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("local: read %s: %w", dir, err)
	}
	var out []*T
	for _, de := range entries {
		if de.IsDir() || strings.HasSuffix(de.Name(), tmpSuffix) {
			continue
		}
		path := filepath.Join(dir, de.Name())
		data, err := os.ReadFile(path) //nolint:gosec // a file of the agent's own data dir
		if err != nil {
			return nil, fmt.Errorf("local: read %s: %w", path, err)
		}
		v := new(T)
		if err := json.Unmarshal(data, v); err != nil {
			s.logger.Error("failed to decode persisted file, skipping it", "file", path, "error", err)
			continue
		}
		out = append(out, v)
	}
	return out, nil
}
