package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"sync"
	"time"

	"github.com/trellis-mesh/trellis/agent/checks"
	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/local"
	"github.com/trellis-mesh/trellis/agent/token"
	"github.com/trellis-mesh/trellis/structs"
	"github.com/trellis-mesh/trellis/version"
)

// reapInterval is how often the agent looks for services whose checks have
// been critical longer than their DeregisterCriticalServiceAfter.
const reapInterval = 3 * time.Second

// localServices is the agent's own services and checks: the local state,
// the check runners and the anti-entropy syncer, wired together. It is what
// the HTTP API's LocalAgent calls, and it turns the components' errors
// into HTTP statuses (this is the edge for them). Every change through it
// is synced to the catalog before it answers (see synced).
type localServices struct {
	logger *slog.Logger
	state  *local.State
	checks *checks.Manager
	syncer *local.Syncer
	// tokens registers config-file services without a token of their own
	// (config_services.go).
	tokens *token.Store

	// regMu serialises registrations so that the runners started for one
	// registration match the state it left.
	regMu sync.Mutex
	// configServices and configChecks are the IDs of the services and
	// checks the config files registered (config_services.go); guarded by
	// regMu.
	configServices map[string]bool
	configChecks   map[string]bool

	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// nodeMeta is the node's metadata in the catalog: the configured pairs and
// the two Consul's agents add (the "consul-" prefix is reserved for them, so
// no configuration can set them): the network segment, always "" without
// Enterprise segments, and the agent's version, which tools such as the
// consul/api tests and upgrade checks read.
func nodeMeta(configured map[string]string) map[string]string {
	m := maps.Clone(configured)
	if m == nil {
		m = make(map[string]string, 2)
	}
	m["consul-network-segment"] = ""
	m["consul-version"] = version.ConsulVersion
	return m
}

// nodeLocality is the configured locality in the catalog's terms.
func nodeLocality(l *config.Locality) *structs.Locality {
	if l == nil {
		return nil
	}
	return &structs.Locality{Region: l.Region, Zone: l.Zone}
}

func (a *Agent) startLocal() error {
	rc := a.rc
	dataDir := rc.DataDir
	if rc.DevMode {
		dataDir = ""
	}
	st, err := local.NewState(local.Config{
		Logger:              a.logger.With("component", "local"),
		NodeName:            rc.NodeName,
		NodeID:              rc.NodeID,
		Datacenter:          rc.Datacenter,
		AdvertiseAddr:       rc.Addresses.Advertise,
		NodeMeta:            nodeMeta(rc.NodeMeta),
		Locality:            nodeLocality(rc.Locality),
		DataDir:             dataDir,
		SidecarMinPort:      rc.Ports.SidecarMin,
		SidecarMaxPort:      rc.Ports.SidecarMax,
		CheckUpdateInterval: rc.CheckUpdateInterval,

		EnableScriptChecks:      rc.EnableScriptChecks,
		EnableLocalScriptChecks: rc.EnableLocalScriptChecks,
	})
	if err != nil {
		return err
	}
	if err := st.Load(); err != nil {
		return fmt.Errorf("agent: load local services: %w", err)
	}
	mgr, err := checks.NewManager(checks.Config{
		Notifier:    st,
		AliasSource: st,
		RPC:         a,
		Datacenter:  rc.Datacenter,
		Logger:      a.logger.With("component", "checks"),
	})
	if err != nil {
		return err
	}
	syncer, err := local.NewSyncer(local.SyncerConfig{
		State:       st,
		RPC:         a,
		Logger:      a.logger.With("component", "anti-entropy"),
		Interval:    rc.AEInterval,
		ClusterSize: func() int { return len(a.members.Members()) },
		Tokens:      a.tokens,
	})
	if err != nil {
		mgr.Stop()
		return err
	}
	ls := &localServices{logger: a.logger, state: st, checks: mgr, syncer: syncer, tokens: a.tokens,
		configServices: map[string]bool{}, configChecks: map[string]bool{}}
	// Checks loaded from the data dir run again from the start.
	for id, cs := range st.CheckStates() {
		if cs.Type != nil {
			if err := mgr.Add(id, cs.Type, cs.Check.ServiceID); err != nil {
				a.logger.Warn("cannot restart persisted check", "check", id, "error", err)
			}
		}
	}
	defs, err := decodeConfigDefinitions(rc)
	if err == nil {
		err = ls.applyConfig(defs)
	}
	if err != nil {
		syncer.Stop()
		mgr.Stop()
		return err
	}
	syncer.Start()
	ctx, cancel := context.WithCancel(context.Background())
	ls.cancel = cancel
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		ls.reapLoop(ctx)
	}()
	a.local = ls
	return nil
}

// syncTimeout bounds the sync a change through the agent API waits for:
// Consul's hold time for a call that finds no leader, and some margin.
const syncTimeout = 10 * time.Second

// synced pushes what a successful change through the agent API left out
// of sync to the catalog before the call answers, as Consul's agent does,
// so that a client reading the catalog right after it finds the change. If
// the servers cannot be reached the change still stands (it is in local
// state) and anti-entropy carries it later: that is logged, not returned.
func (l *localServices) synced(err error) error {
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncTimeout)
	defer cancel()
	if serr := l.syncer.SyncChanges(ctx); serr != nil {
		l.logger.Warn("failed syncing changes; anti-entropy will retry", "error", serr)
	}
	return nil
}

// stop ends the reaper, the syncer and every check runner.
func (l *localServices) stop() {
	l.cancel()
	l.wg.Wait()
	l.syncer.Stop()
	l.checks.Stop()
}

// reapLoop deregisters services with a check that has been critical for
// longer than its DeregisterCriticalServiceAfter.
func (l *localServices) reapLoop(ctx context.Context) {
	t := time.NewTicker(reapInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		for id, cs := range l.state.CheckStates() {
			if cs.Type == nil || cs.Check.ServiceID == "" || cs.Type.DeregisterCriticalServiceAfter <= 0 {
				continue
			}
			if cs.Critical() && now.Sub(cs.CriticalSince) > cs.Type.DeregisterCriticalServiceAfter.Duration() {
				l.logger.Info("deregistering service whose check stayed critical", "service", cs.Check.ServiceID, "check", id)
				if err := l.DeregisterService(cs.Check.ServiceID); err != nil {
					l.logger.Warn("reaping service failed", "service", cs.Check.ServiceID, "error", err)
				}
			}
		}
	}
}

// RegisterService registers (or replaces) a service and its checks, then
// starts their runners.
func (l *localServices) RegisterService(def *structs.ServiceDefinition, token string, replace bool) error {
	return l.synced(l.registerService(def, token, replace))
}

func (l *localServices) registerService(def *structs.ServiceDefinition, token string, replace bool) error {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	res, err := l.state.RegisterService(def, token, replace)
	if err != nil {
		return httpStatus(err)
	}
	// Registered through the API, the service is the API's now: a reload
	// whose files no longer define it leaves it (as Consul, which loads
	// it back from the data dir).
	delete(l.configServices, res.Service.ID)
	return httpStatus(l.startRunnersLocked(res))
}

// startRunnersLocked stops the runners of the checks a registration
// removed and starts those of its checks. Call it with regMu held.
func (l *localServices) startRunnersLocked(res *local.RegisterResult) error {
	for _, id := range res.RemovedChecks {
		l.checks.Remove(id)
	}
	for _, c := range res.Checks {
		if c.Type == nil {
			continue
		}
		if err := l.checks.Add(c.Check.CheckID, c.Type, c.Check.ServiceID); err != nil {
			return err
		}
	}
	return nil
}

// DeregisterService removes a service (and its sidecar) and stops its
// checks.
func (l *localServices) DeregisterService(id string) error {
	return l.synced(l.deregisterService(id))
}

func (l *localServices) deregisterService(id string) error {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	removed, err := l.state.RemoveService(id)
	if err != nil {
		return httpStatus(err)
	}
	for _, c := range removed {
		l.checks.Remove(c)
	}
	return nil
}

func (l *localServices) Services() map[string]*structs.NodeService { return l.state.Services() }

func (l *localServices) Service(id string) *structs.NodeService { return l.state.Service(id) }

func (l *localServices) WatchService(id string) (*structs.NodeService, string, <-chan struct{}) {
	return l.state.WatchService(id)
}

func (l *localServices) Checks() structs.HealthChecks { return l.state.Checks() }

// RegisterCheck registers a check and starts its runner.
func (l *localServices) RegisterCheck(def *structs.CheckDefinition, token string) error {
	return l.synced(l.registerCheck(def, token))
}

func (l *localServices) registerCheck(def *structs.CheckDefinition, token string) error {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	cs, err := l.state.RegisterCheck(def, token)
	if err != nil {
		return httpStatus(err)
	}
	if cs.Type != nil {
		if err := l.checks.Add(cs.Check.CheckID, cs.Type, cs.Check.ServiceID); err != nil {
			_ = l.state.RemoveCheck(cs.Check.CheckID)
			return httpStatus(err)
		}
	}
	return nil
}

// DeregisterCheck removes a check and stops its runner.
func (l *localServices) DeregisterCheck(id string) error {
	return l.synced(l.deregisterCheck(id))
}

func (l *localServices) deregisterCheck(id string) error {
	l.regMu.Lock()
	defer l.regMu.Unlock()
	if err := l.state.RemoveCheck(id); err != nil {
		return httpStatus(err)
	}
	l.checks.Remove(id)
	return nil
}

// UpdateTTL sets a TTL check's status through its runner (which also resets
// its timer).
func (l *localServices) UpdateTTL(id, status, output string) error {
	return l.synced(l.updateTTL(id, status, output))
}

func (l *localServices) updateTTL(id, status, output string) error {
	if err := l.checks.UpdateTTL(id, status, output); err != nil {
		if errors.Is(err, checks.ErrCheckNotFound) && l.state.Check(id) == nil {
			return &httpapi.StatusError{Code: http.StatusNotFound, Msg: fmt.Sprintf("Unknown check ID %q. Ensure that the check ID is passed, not the check name.", id)}
		}
		return httpStatus(err)
	}
	return nil
}

// SetMaintenance toggles node or service maintenance.
func (l *localServices) SetMaintenance(serviceID string, enable bool, reason string) error {
	return l.synced(l.setMaintenance(serviceID, enable, reason))
}

func (l *localServices) setMaintenance(serviceID string, enable bool, reason string) error {
	var err error
	switch {
	case serviceID == "" && enable:
		err = l.state.EnableNodeMaintenance(reason)
	case serviceID == "":
		err = l.state.DisableNodeMaintenance()
	case enable:
		err = l.state.EnableServiceMaintenance(serviceID, reason)
	default:
		err = l.state.DisableServiceMaintenance(serviceID)
	}
	return httpStatus(err)
}

// httpStatus attaches the HTTP status Consul answers with to the local
// state's and check runners' errors.
func httpStatus(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, local.ErrInvalid), errors.Is(err, checks.ErrInvalidCheck),
		errors.Is(err, checks.ErrUnsupportedCheck), errors.Is(err, checks.ErrInvalidStatus):
		return &httpapi.StatusError{Code: http.StatusBadRequest, Msg: err.Error()}
	case errors.Is(err, local.ErrServiceNotFound), errors.Is(err, local.ErrCheckNotFound), errors.Is(err, checks.ErrCheckNotFound):
		return &httpapi.StatusError{Code: http.StatusNotFound, Msg: err.Error()}
	}
	return err
}
