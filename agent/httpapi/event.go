package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/trellis-mesh/trellis/acl"
	"github.com/trellis-mesh/trellis/agent/authz"
	"github.com/trellis-mesh/trellis/structs"
)

// Events fires user events over gossip and lists the ones this agent
// received and accepted (its ring buffer).
type Events interface {
	// FireEvent validates and broadcasts ev, which carries its ID.
	FireEvent(ev *structs.UserEvent) error
	// UserEvents lists the kept events, oldest first, and a channel that
	// closes when the next one arrives.
	UserEvents() ([]*structs.UserEvent, <-chan struct{})
}

// Limits of a blocking event list, as Consul's blocking queries.
const (
	defaultEventWait = 5 * time.Minute
	maxEventWait     = 10 * time.Minute
)

// eventFire handles PUT /v1/event/fire/<name>: the body is the payload,
// ?node=, ?service= and ?tag= are the receivers' filters. The answer is the
// event as fired (LTime 0: Serf assigns it on the way).
func (s *Server) eventFire(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.events == nil {
		return nil, &httpError{code: http.StatusNotImplemented, msg: "events are not available on this agent"}
	}
	ev := &structs.UserEvent{Name: pathSuffix(r, "/v1/event/fire/"), Version: structs.UserEventVersion}
	if ev.Name == "" {
		return nil, badRequest("Missing name")
	}
	if dc := s.parseDC(r); dc != s.dc {
		return nil, structs.ErrNoDCPath
	}
	// The agent broadcasts the event itself, so no server checks it:
	// Consul's event:write on the name is asked here.
	if err := s.requireACL(r, authz.Write(acl.ResourceEvent, ev.Name)); err != nil {
		return nil, err
	}
	q := r.URL.Query()
	ev.NodeFilter, ev.ServiceFilter, ev.TagFilter = q.Get("node"), q.Get("service"), q.Get("tag")
	payload, err := readBody(r, maxJSONBody)
	if err != nil {
		return nil, tooLarge("Request body too large")
	}
	if len(payload) > 0 {
		// An empty body is a null payload, as in Consul's answer.
		ev.Payload = payload
	}
	if ev.ID, err = newUUID(); err != nil {
		return nil, err
	}
	if err := s.events.FireEvent(ev); err != nil {
		return nil, err
	}
	return ev, nil
}

// eventList handles GET /v1/event/list: the events this agent kept,
// oldest first, optionally only those named ?name=. X-Consul-Index is
// derived from the newest listed event's ID (eventIndex), 1 for none; with
// ?index= the call blocks while the index equals it, up to ?wait=.
func (s *Server) eventList(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.events == nil {
		return nil, &httpError{code: http.StatusNotImplemented, msg: "events are not available on this agent"}
	}
	var q structs.QueryOptions
	if err := s.parseQuery(r, &q); err != nil {
		return nil, err
	}
	name := r.URL.Query().Get("name")
	wait := q.MaxQueryTime
	if wait <= 0 {
		wait = defaultEventWait
	}
	timeout := time.NewTimer(min(wait, maxEventWait))
	defer timeout.Stop()
	for {
		all, changed := s.events.UserEvents()
		events, err := s.readableEvents(r, all, name)
		if err != nil {
			return nil, err
		}
		index := uint64(1)
		if len(events) > 0 {
			index = eventIndex(events[len(events)-1].ID)
		}
		// The index is not monotonic, so only equality means "nothing new".
		if q.MinQueryIndex == 0 || index != q.MinQueryIndex {
			w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
			return events, nil
		}
		select {
		case <-changed:
		case <-timeout.C:
			w.Header().Set("X-Consul-Index", strconv.FormatUint(index, 10))
			return events, nil
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
}

// readableEvents are the events named name (all with "") whose name the
// request's token may read (event:read), as Consul filters the list; the
// token is asked again at each wake of a blocking list, so a deleted one
// gets Consul's 403 rather than the next event.
func (s *Server) readableEvents(r *http.Request, all []*structs.UserEvent, name string) ([]*structs.UserEvent, error) {
	named := make([]*structs.UserEvent, 0, len(all))
	for _, ev := range all {
		if name == "" || ev.Name == name {
			named = append(named, ev)
		}
	}
	checks := make([]authz.Check, 0, len(named)+1)
	for _, ev := range named {
		checks = append(checks, authz.Read(acl.ResourceEvent, ev.Name))
	}
	// One more check, its answer unused, so that a list with no event
	// still resolves the token: an unknown one gets Consul's 403.
	checks = append(checks, authz.Read(acl.ResourceEvent, ""))
	allowed, err := s.aclAllowed(r, checks)
	if err != nil {
		return nil, err
	}
	events := make([]*structs.UserEvent, 0, len(named))
	for i, ev := range named {
		if allowed[i] {
			events = append(events, ev)
		}
	}
	return events, nil
}

// eventIndex is the list's X-Consul-Index for its newest event: never 0,
// which a client would not block on.
func eventIndex(id string) uint64 {
	if idx := structs.UserEventIndex(id); idx != 0 {
		return idx
	}
	return 1
}
