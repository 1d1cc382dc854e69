package local

import (
	"errors"
	"fmt"

	"github.com/trellis-mesh/trellis/structs"
)

// Maintenance mode, as Consul implements it: a critical check with the
// reason as its Notes takes the node (or one service) out of every
// healthy result until it is removed again.

const (
	// NodeMaintCheckID is the check that puts the whole node in
	// maintenance.
	NodeMaintCheckID = "_node_maintenance"
	// ServiceMaintPrefix prefixes the service ID in a service's
	// maintenance check ID.
	ServiceMaintPrefix = "_service_maintenance:"
	// maintCheckType is the Type maintenance checks show.
	maintCheckType = "maintenance"

	defaultNodeMaintReason    = "Maintenance mode is enabled for this node, but no reason was provided. This is a default message."
	defaultServiceMaintReason = "Maintenance mode is enabled for this service, but no reason was provided. This is a default message."
)

// ServiceMaintCheckID is the maintenance check ID of a service.
func ServiceMaintCheckID(serviceID string) string { return ServiceMaintPrefix + serviceID }

// EnableNodeMaintenance puts the node in maintenance (PUT
// /v1/agent/maintenance?enable=true&reason=...). It does nothing when the
// node is in maintenance already; an empty reason gets Consul's default
// text.
func (s *State) EnableNodeMaintenance(reason string) error {
	if s.Check(NodeMaintCheckID) != nil {
		return nil
	}
	if reason == "" {
		reason = defaultNodeMaintReason
	}
	return s.AddCheck(&structs.HealthCheck{
		CheckID: NodeMaintCheckID,
		Name:    "Node Maintenance Mode",
		Notes:   reason,
		Status:  structs.HealthCritical,
		Type:    maintCheckType,
	}, nil, "")
}

// DisableNodeMaintenance takes the node out of maintenance; it does
// nothing when the node is not in maintenance.
func (s *State) DisableNodeMaintenance() error {
	if s.Check(NodeMaintCheckID) == nil {
		return nil
	}
	return ignoreNotFound(s.RemoveCheck(NodeMaintCheckID))
}

// EnableServiceMaintenance puts one service in maintenance (PUT
// /v1/agent/service/maintenance/<id>?enable=true). It fails with
// ErrServiceNotFound (Consul's 404 text) for an unknown service and does
// nothing when the service is in maintenance already.
func (s *State) EnableServiceMaintenance(serviceID, reason string) error {
	svc := s.Service(serviceID)
	if svc == nil {
		return noServiceRegistered(serviceID)
	}
	if s.Check(ServiceMaintCheckID(serviceID)) != nil {
		return nil
	}
	if reason == "" {
		reason = defaultServiceMaintReason
	}
	return s.AddCheck(&structs.HealthCheck{
		CheckID:   ServiceMaintCheckID(serviceID),
		Name:      "Service Maintenance Mode",
		Notes:     reason,
		ServiceID: serviceID,
		Status:    structs.HealthCritical,
		Type:      maintCheckType,
	}, nil, s.ServiceToken(serviceID))
}

// DisableServiceMaintenance takes a service out of maintenance. It fails
// with ErrServiceNotFound for an unknown service.
func (s *State) DisableServiceMaintenance(serviceID string) error {
	if !s.ServiceExists(serviceID) {
		return noServiceRegistered(serviceID)
	}
	if s.Check(ServiceMaintCheckID(serviceID)) == nil {
		return nil
	}
	return ignoreNotFound(s.RemoveCheck(ServiceMaintCheckID(serviceID)))
}

func noServiceRegistered(id string) error {
	return &notFoundError{sentinel: ErrServiceNotFound, msg: fmt.Sprintf("No service registered with ID %q", id)}
}

// ignoreNotFound: a concurrent disable got there first, which is fine.
func ignoreNotFound(err error) error {
	if errors.Is(err, ErrCheckNotFound) {
		return nil
	}
	return err
}
