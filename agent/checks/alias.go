package checks

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/internal/wait"
	"github.com/trellis-mesh/trellis/structs"
)

// Alias check timings, Consul's values.
const (
	// aliasRefresh re-reads local state even without a notification, in
	// case an edge was missed (node-level check changes, for instance).
	aliasRefresh = time.Minute
	// aliasMaxQueryTime is the wait of each blocking Health.NodeChecks.
	aliasMaxQueryTime = time.Minute
	// aliasBackoffMin failed queries are retried at once; later ones wait
	// 2s, 4s, ... up to aliasBackoffMax.
	aliasBackoffMin = 3
	aliasBackoffMax = time.Minute
	// aliasExistsAttempts bounds the Catalog.NodeServices retries (1s, 2s
	// apart) used to tell "no checks" from "no service".
	aliasExistsAttempts = 3
)

// AliasCheckConfig configures an alias check.
type AliasCheckConfig struct {
	CheckID string
	// Node is AliasNode: when set, the check follows that catalog node
	// (and ServiceID on it) through blocking RPC queries. When empty, it
	// follows the local service ServiceID through Source.
	Node string
	// ServiceID is AliasService: the ID (not name) of the aliased service.
	// Empty with Node set aliases the node's own (node-level) checks.
	ServiceID string
	Notifier  Notifier
	// Source is required when Node is empty.
	Source AliasSource
	// RPC and Datacenter are required when Node is set: the check runs
	// blocking Health.NodeChecks queries and one-shot Catalog.NodeServices
	// reads, and cancelling their context must abort a blocking call.
	RPC        structs.Caller
	Datacenter string
	Logger     *slog.Logger
}

// AliasCheck mirrors the health of another service instance or node: the
// worst status among the aliased service's checks and its node's
// node-level checks (critical beats warning beats passing). With no
// failing check it is passing ("All checks passing." or "No checks
// found."); when the aliased service does not exist it is critical
// ("Service <id> could not be found on node <node>").
type AliasCheck struct {
	checkID   string
	node      string
	serviceID string
	notify    Notifier
	source    AliasSource
	rpc       structs.Caller
	dc        string
	logger    *slog.Logger
	lc        lifecycle

	// backoffUnit scales the query retry backoff (tests shorten it).
	backoffUnit time.Duration
}

// NewAliasCheck builds an alias check; Start begins watching.
func NewAliasCheck(cfg AliasCheckConfig) *AliasCheck {
	return &AliasCheck{
		checkID:     cfg.CheckID,
		node:        cfg.Node,
		serviceID:   cfg.ServiceID,
		notify:      cfg.Notifier,
		source:      cfg.Source,
		rpc:         cfg.RPC,
		dc:          cfg.Datacenter,
		logger:      orDiscard(cfg.Logger),
		backoffUnit: time.Second,
	}
}

// Start reports the current aliased status at once, then follows changes.
func (c *AliasCheck) Start() {
	if c.node != "" {
		c.lc.start(c.runQuery)
		return
	}
	c.lc.start(c.runLocal)
}

// Stop ends the watch (a blocking query in flight is cancelled) and waits.
func (c *AliasCheck) Stop() { c.lc.stop() }

func (c *AliasCheck) runLocal(ctx context.Context) {
	// One slot is enough: any pending signal makes us re-read everything.
	notifyCh := make(chan struct{}, 1)
	c.source.AddAliasCheck(c.checkID, c.serviceID, notifyCh)
	defer c.source.RemoveAliasCheck(c.checkID, c.serviceID)

	refresh := time.NewTimer(aliasRefresh)
	defer refresh.Stop()
	for {
		c.process(ctx, c.localChecks(), func(context.Context) bool {
			return c.source.ServiceExists(c.serviceID)
		})
		refresh.Reset(aliasRefresh)
		select {
		case <-ctx.Done():
			return
		case <-notifyCh:
		case <-refresh.C:
		}
	}
}

// localChecks is what a local alias follows: the aliased service's checks
// and the node checks, in check ID order as the catalog lists them. Only
// those two are read, so that a check result among thousands of local
// services costs its own alias checks that much, not a copy of every
// check of the agent.
func (c *AliasCheck) localChecks() structs.HealthChecks {
	out := append(c.source.ChecksForService(c.serviceID), c.source.ChecksForService("")...)
	slices.SortFunc(out, func(a, b *structs.HealthCheck) int { return strings.Compare(a.CheckID, b.CheckID) })
	return out
}

func (c *AliasCheck) runQuery(ctx context.Context) {
	args := structs.NodeSpecificRequest{
		Node: c.node,
		QueryOptions: structs.QueryOptions{
			Datacenter:   c.dc,
			AllowStale:   true,
			MaxQueryTime: aliasMaxQueryTime,
		},
	}
	attempt := 0
	for ctx.Err() == nil {
		if attempt > aliasBackoffMin {
			if !wait.Sleep(ctx, c.backoff(attempt)) {
				return
			}
		}
		// All checks of the node: Consul has no RPC filtering by node and
		// service at once, and the index is shared anyway.
		var out structs.IndexedHealthChecks
		if err := structs.MethodHealthNodeChecks.Call(ctx, c.rpc, &args, &out); err != nil {
			if ctx.Err() != nil {
				return
			}
			attempt++
			// One failure may be a blip (a leader election); the second
			// one turns the alias critical, as in Consul.
			if attempt > 1 {
				c.notify.UpdateCheck(c.checkID, structs.HealthCritical,
					fmt.Sprintf("Failure checking aliased node or service: %s", err))
			}
			continue
		}
		attempt = 0
		// Always block from now on: index 0 would make every query return
		// at once and spin.
		args.MinQueryIndex = max(out.Index, 1)
		c.process(ctx, out.HealthChecks, c.remoteServiceExists)
	}
}

// backoff is the wait before the given failed attempt: 2^(attempt-3)
// units, capped.
func (c *AliasCheck) backoff(attempt int) time.Duration {
	shift := min(attempt-aliasBackoffMin, 31)
	return min(time.Duration(1<<shift)*c.backoffUnit, aliasBackoffMax)
}

// remoteServiceExists asks the catalog whether the aliased service is
// registered on the node. When the question cannot be answered it assumes
// yes, so that an RPC hiccup does not flap the alias to critical.
func (c *AliasCheck) remoteServiceExists(ctx context.Context) bool {
	args := structs.NodeSpecificRequest{
		Node:         c.node,
		QueryOptions: structs.QueryOptions{Datacenter: c.dc, AllowStale: true},
	}
	for attempt := 1; ; attempt++ {
		var out structs.IndexedNodeServices
		err := structs.MethodCatalogNodeServices.Call(ctx, c.rpc, &args, &out)
		if err == nil {
			if out.NodeServices == nil {
				return false
			}
			for _, svc := range out.NodeServices.Services {
				if svc.ID == c.serviceID {
					return true
				}
			}
			return false
		}
		if attempt >= aliasExistsAttempts || !wait.Sleep(ctx, time.Duration(attempt)*c.backoffUnit) {
			c.logger.Warn("alias check cannot tell whether the aliased service exists",
				"check", c.checkID, "node", c.node, "service", c.serviceID, "error", err)
			return true
		}
	}
}

// process folds the checks into one status, exactly as Consul's alias
// check does, and reports it.
func (c *AliasCheck) process(ctx context.Context, checks structs.HealthChecks, exists func(context.Context) bool) {
	health := structs.HealthPassing
	msg := "No checks found."
	serviceFound := false
	for _, chk := range checks {
		if chk == nil || (c.node == "" && chk.CheckID == c.checkID) {
			// Never follow ourselves (an alias of its own service).
			continue
		}
		if c.node != "" && c.node != chk.Node {
			continue
		}
		// Node-level checks (no ServiceID) count for every service on the
		// node; other services' checks do not.
		serviceMatch := chk.ServiceID == c.serviceID
		if chk.ServiceID != "" && !serviceMatch {
			continue
		}
		if serviceMatch {
			serviceFound = true
		}
		if chk.Status == structs.HealthCritical || chk.Status == structs.HealthWarning {
			health = chk.Status
			msg = fmt.Sprintf("Aliased check %q failing: %s", chk.Name, chk.Output)
			// Critical is final; a warning may still be beaten by a
			// critical later in the list.
			if chk.Status == structs.HealthCritical {
				break
			}
		} else if health == structs.HealthPassing {
			msg = "All checks passing."
		}
	}
	if !serviceFound && !exists(ctx) {
		health = structs.HealthCritical
		msg = fmt.Sprintf("Service %s could not be found on node %s", c.serviceID, c.node)
	}
	if ctx.Err() != nil {
		return
	}
	c.notify.UpdateCheck(c.checkID, health, msg)
}
