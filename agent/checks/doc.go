// Package checks runs an agent's health checks: TTL, HTTP, TCP, gRPC,
// alias, script and docker checks (script.go: a process, or `docker exec`
// through the docker CLI; whether one may be registered at all is the
// agent's local state's decision), with Consul's semantics (statuses, output formats, default
// timeouts, the minimum interval, SuccessBeforePassing and
// FailuresBeforeCritical).
//
// A check runner never stores state of its own: every result goes to a
// Notifier (the agent's local state), which decides whether the change is
// worth syncing to the catalog. The Manager is the entry point the agent
// uses: it turns a *structs.CheckType into the right runner, replaces and
// removes runners by check ID, and routes TTL updates from the agent API.
//
// Wiring, in short:
//
//	m, err := checks.NewManager(checks.Config{
//		Notifier:    localState,          // UpdateCheck(id, status, output)
//		AliasSource: localState,          // alias checks of local services
//		RPC:         agent,               // alias checks of other nodes
//		Datacenter:  rc.Datacenter,
//		Logger:      logger,
//	})
//	// on registration, after the check is in local state with
//	// Status = checks.InitialStatus(def):
//	err = m.Add(checkID, def, serviceID)
//	// PUT /v1/agent/check/pass/<id> and friends:
//	err = m.UpdateTTL(checkID, structs.HealthPassing, note)
//	// on deregistration and shutdown:
//	m.Remove(checkID)
//	m.Stop()
//
// Every runner owns exactly one goroutine, started by Start and stopped
// (and waited for) by Stop; after Stop returns the runner never calls its
// Notifier again. Because Stop waits, it must not be called while holding
// a lock that Notifier or AliasSource methods take.
package checks

import (
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

const (
	// MinInterval is Consul's smallest interval between two runs of an HTTP,
	// TCP or gRPC check. The Manager raises shorter intervals to it (with a
	// warning), as Consul's agent does; Config.MinInterval lowers it for
	// tests.
	MinInterval = time.Second

	// DefaultOutputMaxSize is the default cap, in bytes, of the output a
	// check stores (Consul's DefaultBufSize, 4 KiB).
	DefaultOutputMaxSize = 4 * 1024

	// DefaultTimeout bounds one HTTP, TCP or gRPC probe when the definition
	// gives no positive Timeout.
	DefaultTimeout = 10 * time.Second

	// UserAgent is sent by HTTP checks unless the definition sets its own
	// User-Agent header; some services special-case it.
	UserAgent = "Consul Health Check"
)

// Notifier receives every result a check produces. The agent's local state
// implements it. Calls may repeat the current status and output; the
// implementation must treat them as idempotent and ignore unknown IDs
// (a result can race with the check's removal).
type Notifier interface {
	UpdateCheck(checkID string, status, output string)
}

// AliasSource is the agent's local state as an alias check of a local
// service (AliasService set, AliasNode empty) sees it. This mirrors how
// Consul's alias check watches the local state instead of querying
// servers.
//
// The implementation is expected to:
//   - keep, per aliased service ID, the set of notify channels registered
//     by AddAliasCheck, and send on each of them without blocking
//     (select { case ch <- struct{}{}: default: }) whenever that service is
//     added or removed, or one of its checks is added, removed or changes
//     status or output. Node-level check changes may notify too; if they
//     do not, the alias check still picks them up on its periodic refresh
//     (once a minute, as Consul);
//   - return from ChecksForService the current state of the checks of
//     one service registered on this agent, and for "" the node-level
//     checks (the caller only reads them);
//   - answer ServiceExists for a service ID registered on this agent.
//
// None of these methods may block on the alias check itself (they are
// called from its goroutine).
type AliasSource interface {
	AddAliasCheck(checkID, serviceID string, notify chan<- struct{})
	RemoveAliasCheck(checkID, serviceID string)
	ChecksForService(serviceID string) structs.HealthChecks
	ServiceExists(serviceID string) bool
}

// Runner is one running check. Start begins its goroutine (a second Start,
// or a Start after Stop, does nothing); Stop ends it and waits for it.
type Runner interface {
	Start()
	Stop()
}

// InitialStatus is the status a newly registered check has before its
// first result: the definition's Status when given, critical otherwise
// (Consul's rule; TTL checks therefore start critical). The agent stores
// the check in local state with this status before calling Manager.Add.
func InitialStatus(def *structs.CheckType) string {
	if def != nil && def.Status != "" {
		return def.Status
	}
	return structs.HealthCritical
}
