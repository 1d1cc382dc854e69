package structs

import "fmt"

// ExportedServicesConfigEntry (kind exported-services) lists the services
// of a partition that other clusters may consume. Trellis has one
// partition, "default", the only name the entry may have, and no cluster
// peering: exports are stored and served (and resolved by GET
// /v1/exported-services) but no peer can reach them.
type ExportedServicesConfigEntry struct {
	Kind     string
	Name     string
	Services []ExportedService `json:",omitempty"`
	Meta     map[string]string `json:",omitempty"`
	RaftIndex
}

// ExportedService is one service (or "*", every service) and who may
// consume it.
type ExportedService struct {
	Name      string
	Namespace string            `json:",omitempty"`
	Consumers []ServiceConsumer `json:",omitempty"`
}

// ServiceConsumer is one consumer: exactly one of a partition, a peer or a
// sameness group. Partitions and sameness groups are Consul Enterprise
// features: only peers are accepted.
type ServiceConsumer struct {
	Partition     string `json:",omitempty"`
	Peer          string `json:",omitempty" alias:"peer_name"`
	SamenessGroup string `json:",omitempty" alias:"sameness_group"`
}

// ResolvedExportedService is one exported service as GET
// /v1/exported-services answers it: wildcards expanded to the services in
// the catalog, consumers grouped.
type ResolvedExportedService struct {
	Service   string
	Consumers ResolvedConsumers
}

// ResolvedConsumers are the consumers of a resolved exported service.
type ResolvedConsumers struct {
	Peers      []string `json:",omitempty"`
	Partitions []string `json:",omitempty"`
}

// ExportedServicesQuery asks for the resolved exported services.
type ExportedServicesQuery struct {
	QueryOptions
}

// IndexedExportedServices is the reply to ExportedServicesQuery, in
// service name order.
type IndexedExportedServices struct {
	Services []ResolvedExportedService
	QueryMeta
}

// GetKind implements ConfigEntry.
func (e *ExportedServicesConfigEntry) GetKind() string { return ExportedServices }

// GetName implements ConfigEntry.
func (e *ExportedServicesConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ExportedServicesConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ExportedServicesConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry.
func (e *ExportedServicesConfigEntry) Normalize() error {
	e.Kind = ExportedServices
	return nil
}

// Validate implements ConfigEntry.
func (e *ExportedServicesConfigEntry) Validate() error {
	if e.Name != DefaultPartitionName {
		return fmt.Errorf("exported-services Name must be %q, the name of the partition, not %q", DefaultPartitionName, e.Name)
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	for i, s := range e.Services {
		at := fmt.Sprintf("Services[%d]", i)
		if s.Name == "" {
			return fmt.Errorf("%s: service name cannot be empty", at)
		}
		if s.Namespace != "" && s.Namespace != IntentionDefaultNamespace {
			return fmt.Errorf("%s: Namespace %q: namespaces are a Consul Enterprise feature", at, s.Namespace)
		}
		if len(s.Consumers) == 0 {
			return fmt.Errorf("%s: must have at least one consumer", at)
		}
		for j, c := range s.Consumers {
			cat := fmt.Sprintf("%s.Consumers[%d]", at, j)
			switch {
			case countTrue(c.Partition != "", c.Peer != "", c.SamenessGroup != "") != 1:
				return fmt.Errorf("%s: must set exactly one of Peer, Partition or SamenessGroup", cat)
			case c.Partition != "":
				return fmt.Errorf("%s: Partition: admin partitions are a Consul Enterprise feature", cat)
			case c.SamenessGroup != "":
				return fmt.Errorf("%s: SamenessGroup: sameness groups are a Consul Enterprise feature", cat)
			case c.Peer == WildcardSpecifier:
				return fmt.Errorf("%s: exporting to all peers (wildcard) is not supported", cat)
			}
		}
	}
	return nil
}
