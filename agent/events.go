package agent

import (
	"fmt"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/agent/userevent"
	"github.com/trellis-mesh/trellis/structs"
)

// User events travel over Serf straight from the firing agent to every
// member; no server is involved, so events work during a server outage,
// as Consul's do. Each receiving agent applies the event's filters to
// itself and keeps the events it accepts in its ring buffer.

// FireEvent validates ev and broadcasts it (/v1/event/fire). Errors are
// Consul's, answered as 500: a missing name, a filter that does not
// compile, a tag filter without a service filter, or an event Serf finds
// too large.
func (a *Agent) FireEvent(ev *structs.UserEvent) error {
	if err := userevent.Validate(ev); err != nil {
		return err
	}
	name, payload, err := userevent.Encode(a.codec, ev)
	if err != nil {
		return err
	}
	if err := a.gossip.UserEvent(name, payload); err != nil {
		return fmt.Errorf("agent: fire event %q: %w", ev.Name, err)
	}
	return nil
}

// UserEvents lists the events this agent kept, oldest first, and a channel
// that closes when the next one arrives (/v1/event/list).
func (a *Agent) UserEvents() ([]*structs.UserEvent, <-chan struct{}) {
	return a.events.List()
}

// handleUserEvent keeps a user event this agent's node or local services
// match.
func (a *Agent) handleUserEvent(se serf.UserEvent) {
	ev, ok, err := userevent.Decode(a.codec, se)
	if !ok {
		return
	}
	if err != nil {
		a.logger.Warn("dropping malformed user event", "error", err)
		return
	}
	var services map[string]*structs.NodeService
	if a.local != nil {
		services = a.local.Services()
	}
	if !userevent.Accept(ev, a.rc.NodeName, services) {
		a.logger.Debug("user event filtered out", "event", ev.Name, "id", ev.ID)
		return
	}
	a.logger.Debug("user event received", "event", ev.Name, "id", ev.ID, "ltime", ev.LTime)
	a.events.Add(ev)
}
