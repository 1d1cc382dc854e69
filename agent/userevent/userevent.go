// Package userevent holds what an agent does with Consul's user events:
// their validation, their encoding inside a Serf user event, the filters a
// receiving agent applies against itself, and the ring buffer of the last
// events it accepted (/v1/event/list).
package userevent

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/hashicorp/serf/serf"

	"github.com/trellis-mesh/trellis/structs"
)

// SerfPrefix opens the Serf name of every user event, as in Consul, so
// that other Serf user events (none today) cannot be taken for one.
const SerfPrefix = "consul:event:"

// Sentinel errors of the package; the texts are Consul's.
var (
	ErrMissingName       = errors.New("User event missing name")
	ErrTagWithoutService = errors.New("Cannot provide tag filter without service filter")
	ErrInvalidFilter     = errors.New("invalid event filter")
)

// Validate checks an event before it is fired: a name, filters that
// compile, and a tag filter only together with a service filter.
func Validate(ev *structs.UserEvent) error {
	if ev.Name == "" {
		return ErrMissingName
	}
	if ev.TagFilter != "" && ev.ServiceFilter == "" {
		return ErrTagWithoutService
	}
	for _, f := range []struct{ what, expr string }{
		{"node", ev.NodeFilter}, {"service", ev.ServiceFilter}, {"tag", ev.TagFilter},
	} {
		if _, err := regexp.Compile(f.expr); err != nil {
			return fmt.Errorf("%w: Invalid %s filter: %w", ErrInvalidFilter, f.what, err)
		}
	}
	return nil
}

// Encode gives the Serf name and payload that carry ev.
func Encode(c *structs.Codec, ev *structs.UserEvent) (string, []byte, error) {
	payload, err := c.Marshal(ev)
	if err != nil {
		return "", nil, fmt.Errorf("userevent: encode: %w", err)
	}
	return SerfPrefix + ev.Name, payload, nil
}

// Decode reads a user event out of a Serf user event, with Serf's Lamport
// time. ok is false for a Serf event that is not one.
func Decode(c *structs.Codec, se serf.UserEvent) (ev *structs.UserEvent, ok bool, err error) {
	if !strings.HasPrefix(se.Name, SerfPrefix) {
		return nil, false, nil
	}
	ev = new(structs.UserEvent)
	if err := c.Unmarshal(se.Payload, ev); err != nil {
		return nil, true, fmt.Errorf("userevent: decode %q: %w", se.Name, err)
	}
	ev.LTime = uint64(se.LTime)
	return ev, true, nil
}

// Accept reports whether the agent of node, with its local services,
// keeps ev: a version it understands, and every filter matched (the node
// name; some local service's name or ID; and, with a tag filter, a tag of
// that same service). A filter that does not compile matches nothing.
func Accept(ev *structs.UserEvent, node string, services map[string]*structs.NodeService) bool {
	if ev.Version > structs.UserEventVersion {
		return false
	}
	if ev.NodeFilter != "" && !matches(ev.NodeFilter, node) {
		return false
	}
	if ev.ServiceFilter == "" {
		return true
	}
	svcRe, err := regexp.Compile(ev.ServiceFilter)
	if err != nil {
		return false
	}
	var tagRe *regexp.Regexp
	if ev.TagFilter != "" {
		if tagRe, err = regexp.Compile(ev.TagFilter); err != nil {
			return false
		}
	}
	for id, svc := range services {
		if svc == nil || !(svcRe.MatchString(svc.Service) || svcRe.MatchString(id)) {
			continue
		}
		if tagRe == nil {
			return true
		}
		for _, tag := range svc.Tags {
			if tagRe.MatchString(tag) {
				return true
			}
		}
	}
	return false
}

func matches(expr, s string) bool {
	re, err := regexp.Compile(expr)
	return err == nil && re.MatchString(s)
}
