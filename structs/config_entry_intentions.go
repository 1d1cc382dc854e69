package structs

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// ServiceIntentionsConfigEntry (kind service-intentions) holds every
// intention whose destination is the service Name: one SourceIntention per
// source, each an L4 allow/deny or a list of L7 permissions. Sources are
// kept sorted by precedence, highest first.
type ServiceIntentionsConfigEntry struct {
	Kind    string
	Name    string
	Sources []*SourceIntention
	// JWT requirements are refused when they name a provider (see
	// ErrIntentionJWTUnsupported): Trellis does not verify JWTs.
	JWT  *IntentionJWTRequirement `json:",omitempty"`
	Meta map[string]string        `json:",omitempty"`
	RaftIndex
}

// SourceIntention is the intention from one source service (or "*") to
// the entry's destination.
type SourceIntention struct {
	Name        string
	Action      IntentionAction        `json:",omitempty"`
	Permissions []*IntentionPermission `json:",omitempty"`
	// Precedence is computed on every write (see IntentionPrecedence).
	Precedence  int
	Type        IntentionSourceType
	Description string `json:",omitempty"`
	// The legacy fields hold what the deprecated ID-based intention API
	// (POST /v1/connect/intentions, /v1/connect/intentions/<id>) keeps per
	// intention: its ID, Meta and times. Only that API sets them; a
	// config-entry write clears LegacyID and the times (turning the source
	// into a config-entry intention) and refuses LegacyMeta, as Consul's.
	LegacyID         string            `json:",omitempty" alias:"legacy_id"`
	LegacyMeta       map[string]string `json:",omitempty" alias:"legacy_meta"`
	LegacyCreateTime *time.Time        `json:",omitempty" alias:"legacy_create_time"`
	LegacyUpdateTime *time.Time        `json:",omitempty" alias:"legacy_update_time"`
	Namespace        string            `json:",omitempty"`
	Partition        string            `json:",omitempty"`
	Peer             string            `json:",omitempty"`
	SamenessGroup    string            `json:",omitempty" alias:"sameness_group"`
}

// IntentionPermission is one L7 rule: requests matching HTTP get Action.
type IntentionPermission struct {
	Action IntentionAction
	HTTP   *IntentionHTTPPermission `json:",omitempty"`
	JWT    *IntentionJWTRequirement `json:",omitempty"`
}

// IntentionHTTPPermission matches HTTP requests; every given criterion must
// hold.
type IntentionHTTPPermission struct {
	PathExact  string                          `json:",omitempty" alias:"path_exact"`
	PathPrefix string                          `json:",omitempty" alias:"path_prefix"`
	PathRegex  string                          `json:",omitempty" alias:"path_regex"`
	Header     []IntentionHTTPHeaderPermission `json:",omitempty"`
	Methods    []string                        `json:",omitempty"`
}

// IntentionHTTPHeaderPermission matches one request header.
type IntentionHTTPHeaderPermission struct {
	Name       string
	Present    bool   `json:",omitempty"`
	Exact      string `json:",omitempty"`
	Prefix     string `json:",omitempty"`
	Suffix     string `json:",omitempty"`
	Contains   string `json:",omitempty"`
	Regex      string `json:",omitempty"`
	Invert     bool   `json:",omitempty"`
	IgnoreCase bool   `json:",omitempty" alias:"ignore_case"`
}

// IntentionJWTRequirement lists JWT providers a request must satisfy.
type IntentionJWTRequirement struct {
	Providers []*IntentionJWTProvider `json:",omitempty"`
}

// IntentionJWTProvider names a provider and the claims to verify.
type IntentionJWTProvider struct {
	Name         string                           `json:",omitempty"`
	VerifyClaims []*IntentionJWTClaimVerification `json:",omitempty" alias:"verify_claims"`
}

// IntentionJWTClaimVerification is one claim to verify.
type IntentionJWTClaimVerification struct {
	Path  []string `json:",omitempty"`
	Value string   `json:",omitempty"`
}

// GetKind implements ConfigEntry.
func (e *ServiceIntentionsConfigEntry) GetKind() string { return ServiceIntentions }

// GetName implements ConfigEntry.
func (e *ServiceIntentionsConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *ServiceIntentionsConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *ServiceIntentionsConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: source types default to "consul",
// methods are uppercased, precedences computed and the sources sorted by
// precedence (stable, so equal precedences keep their order). Legacy IDs
// and times are cleared: a config-entry write makes every source a
// config-entry intention.
func (e *ServiceIntentionsConfigEntry) Normalize() error {
	e.normalize(false)
	return nil
}

// LegacyNormalize is Normalize for a write of the ID-based intention API:
// the legacy fields are kept.
func (e *ServiceIntentionsConfigEntry) LegacyNormalize() error {
	e.normalize(true)
	return nil
}

func (e *ServiceIntentionsConfigEntry) normalize(legacyWrite bool) {
	e.Kind = ServiceIntentions
	for _, src := range e.Sources {
		if src == nil {
			continue
		}
		if src.Type == "" {
			src.Type = IntentionSourceConsul
		}
		if !legacyWrite {
			// LegacyMeta stays, for Validate to refuse: dropping it
			// silently would lose the user's data.
			src.LegacyID = ""
			src.LegacyCreateTime, src.LegacyUpdateTime = nil, nil
		}
		src.Precedence = IntentionPrecedence(src.Name, e.Name)
		for _, p := range src.Permissions {
			if p == nil || p.HTTP == nil {
				continue
			}
			for i, m := range p.HTTP.Methods {
				p.HTTP.Methods[i] = strings.ToUpper(m)
			}
		}
	}
	sort.SliceStable(e.Sources, func(i, j int) bool {
		a, b := e.Sources[i], e.Sources[j]
		if a == nil || b == nil {
			return b == nil && a != nil
		}
		return a.Precedence > b.Precedence
	})
}

// IntentionPrecedence computes Consul's precedence for a source and
// destination name in the default namespace: 9 exact to exact, 8 "*" to
// exact, 6 exact to "*", 5 "*" to "*".
func IntentionPrecedence(source, destination string) int {
	max := 9
	if destination == WildcardSpecifier {
		max = 6
	}
	if source == WildcardSpecifier {
		return max - 1
	}
	return max
}

// HasWildcardDestination reports whether the entry is for "*".
func (e *ServiceIntentionsConfigEntry) HasWildcardDestination() bool {
	return e.Name == WildcardSpecifier
}

// HasAnyPermissions reports whether any source has L7 permissions.
func (e *ServiceIntentionsConfigEntry) HasAnyPermissions() bool {
	for _, src := range e.Sources {
		if src != nil && len(src.Permissions) > 0 {
			return true
		}
	}
	return false
}

// ErrIntentionJWTUnsupported refuses an intention that requires a JWT.
// Consul's proxies would reject requests without a valid token; Trellis
// cannot verify tokens, so it refuses the intention rather than let those
// requests through.
var ErrIntentionJWTUnsupported = errors.New("JWT requirements in intentions are not supported: Trellis does not verify JWTs, and would allow requests that Consul denies")

// Validate implements ConfigEntry with Consul's messages.
func (e *ServiceIntentionsConfigEntry) Validate() error {
	return e.validate(false)
}

// LegacyValidate is Validate for a write of the ID-based intention API:
// every source must carry a legacy ID and times and an action (no L7
// permissions), and the entry no Meta of its own (each intention's Meta
// is its LegacyMeta).
func (e *ServiceIntentionsConfigEntry) LegacyValidate() error {
	return e.validate(true)
}

func (e *ServiceIntentionsConfigEntry) validate(legacyWrite bool) error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateIntentionWildcard(e.Name); err != nil {
		return err
	}
	if e.JWT != nil {
		for _, p := range e.JWT.Providers {
			if p == nil || p.Name == "" {
				return multiError([]error{errors.New("JWT provider name is required")})
			}
		}
		if len(e.JWT.Providers) > 0 {
			return fmt.Errorf("JWT: %w", ErrIntentionJWTUnsupported)
		}
	}
	if legacyWrite {
		if len(e.Meta) > 0 {
			return errors.New("Meta must be omitted for legacy intention writes")
		}
	} else if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	if len(e.Sources) == 0 {
		return errors.New("At least one source is required")
	}
	seen := make(map[string]bool)
	for i, src := range e.Sources {
		if src == nil || src.Name == "" {
			return fmt.Errorf("Sources[%d].Name is required", i)
		}
		if err := validateIntentionWildcard(src.Name); err != nil {
			return fmt.Errorf("Sources[%d].%w", i, err)
		}
		if src.Namespace != "" && src.Namespace != IntentionDefaultNamespace {
			return fmt.Errorf("Sources[%d].Namespace: Setting Namespace requires Consul Enterprise", i)
		}
		if src.Partition != "" && src.Partition != IntentionDefaultNamespace {
			return fmt.Errorf("Sources[%d].Partition: Setting Partition requires Consul Enterprise", i)
		}
		if src.Peer != "" {
			return fmt.Errorf("Sources[%d].Peer: cluster peering is not supported", i)
		}
		if src.SamenessGroup != "" {
			return fmt.Errorf("Sources[%d].SamenessGroup: Sameness groups are a Consul Enterprise feature", i)
		}
		if len(src.Description) > metaValueMaxLength {
			return fmt.Errorf("Sources[%d].Description exceeds maximum length %d", i, metaValueMaxLength)
		}
		if err := src.validateLegacyFields(i, legacyWrite); err != nil {
			return err
		}
		if legacyWrite || len(src.Permissions) == 0 {
			switch src.Action {
			case IntentionActionAllow, IntentionActionDeny:
			default:
				return fmt.Errorf("Sources[%d].Action must be set to 'allow' or 'deny'", i)
			}
		}
		if len(src.Permissions) > 0 && src.Action != "" {
			return fmt.Errorf("Sources[%d].Action must be omitted if Permissions are specified", i)
		}
		if e.HasWildcardDestination() && len(src.Permissions) > 0 {
			return fmt.Errorf("Sources[%d].Permissions cannot be specified on intentions with wildcarded destinations", i)
		}
		if src.Type != IntentionSourceConsul {
			return fmt.Errorf("Sources[%d].Type must be set to 'consul'", i)
		}
		for j, perm := range src.Permissions {
			if err := validatePermission(i, j, perm); err != nil {
				return err
			}
			if perm.JWT != nil && len(perm.JWT.Providers) > 0 {
				return fmt.Errorf("Sources[%d].Permissions[%d].JWT: %w", i, j, ErrIntentionJWTUnsupported)
			}
		}
		if seen[src.Name] {
			return fmt.Errorf("Sources[%d] defines %q more than once", i, src.Name)
		}
		seen[src.Name] = true
	}
	return nil
}

// validateLegacyFields checks the legacy fields of source i: all set (and
// the meta within Consul's limits) on a legacy write, none otherwise.
func (src *SourceIntention) validateLegacyFields(i int, legacyWrite bool) error {
	if !legacyWrite {
		switch {
		case len(src.LegacyMeta) > 0:
			return fmt.Errorf("Sources[%d].LegacyMeta must be omitted", i)
		case src.LegacyCreateTime != nil:
			return fmt.Errorf("Sources[%d].LegacyCreateTime must be omitted", i)
		case src.LegacyUpdateTime != nil:
			return fmt.Errorf("Sources[%d].LegacyUpdateTime must be omitted", i)
		case src.LegacyID != "":
			return fmt.Errorf("Sources[%d].LegacyID must be omitted", i)
		}
		// An empty LegacyMeta of a source that was a legacy intention.
		src.LegacyMeta = nil
		return nil
	}
	if len(src.LegacyMeta) > metaMaxKeyPairs {
		return fmt.Errorf("Sources[%d].Meta exceeds maximum element count %d", i, metaMaxKeyPairs)
	}
	for k, v := range src.LegacyMeta {
		if len(k) > metaKeyMaxLength {
			return fmt.Errorf("Sources[%d].Meta key %q exceeds maximum length %d", i, k, metaKeyMaxLength)
		}
		if len(v) > metaValueMaxLength {
			return fmt.Errorf("Sources[%d].Meta value for key %q exceeds maximum length %d", i, k, metaValueMaxLength)
		}
	}
	switch {
	case src.LegacyCreateTime == nil:
		return fmt.Errorf("Sources[%d].LegacyCreateTime must be set", i)
	case src.LegacyUpdateTime == nil:
		return fmt.Errorf("Sources[%d].LegacyUpdateTime must be set", i)
	case src.LegacyID == "":
		return fmt.Errorf("Sources[%d].LegacyID must be set", i)
	}
	return nil
}

func validatePermission(i, j int, perm *IntentionPermission) error {
	if perm == nil {
		return fmt.Errorf("Sources[%d].Permissions[%d].Action must be set to 'allow' or 'deny'", i, j)
	}
	switch perm.Action {
	case IntentionActionAllow, IntentionActionDeny:
	default:
		return fmt.Errorf("Sources[%d].Permissions[%d].Action must be set to 'allow' or 'deny'", i, j)
	}
	prefix := fmt.Sprintf("Sources[%d].Permissions[%d].HTTP", i, j)
	h := perm.HTTP
	if h == nil {
		return errors.New(prefix + " is required")
	}
	pathParts := 0
	if h.PathExact != "" {
		pathParts++
		if !strings.HasPrefix(h.PathExact, "/") {
			return fmt.Errorf("%s.PathExact doesn't start with '/': %q", prefix, h.PathExact)
		}
	}
	if h.PathPrefix != "" {
		pathParts++
		if !strings.HasPrefix(h.PathPrefix, "/") {
			return fmt.Errorf("%s.PathPrefix doesn't start with '/': %q", prefix, h.PathPrefix)
		}
	}
	if h.PathRegex != "" {
		pathParts++
	}
	if pathParts > 1 {
		return errors.New(prefix + " should only contain at most one of PathExact, PathPrefix, or PathRegex")
	}
	parts := pathParts
	for k, hdr := range h.Header {
		if hdr.Name == "" {
			return fmt.Errorf("%s.Header[%d] missing required Name field", prefix, k)
		}
		if countSet(hdr.Present, hdr.Exact, hdr.Regex, hdr.Prefix, hdr.Suffix, hdr.Contains) != 1 {
			return fmt.Errorf("%s.Header[%d] should only contain one of Present, Exact, Prefix, Suffix, or Regex", prefix, k)
		}
		parts++
	}
	if len(h.Methods) > 0 {
		found := make(map[string]bool)
		for _, m := range h.Methods {
			if !isValidHTTPMethod(m) {
				return fmt.Errorf("%s.Methods contains an invalid method %q", prefix, m)
			}
			if found[m] {
				return fmt.Errorf("%s.Methods contains %q more than once", prefix, m)
			}
			found[m] = true
		}
		parts++
	}
	if parts == 0 {
		return errors.New(prefix + " should not be empty")
	}
	if perm.JWT != nil {
		for _, p := range perm.JWT.Providers {
			if p == nil || p.Name == "" {
				return multiError([]error{errors.New("JWT provider name is required")})
			}
		}
	}
	return nil
}

// validateIntentionWildcard refuses partial wildcards ("web*").
func validateIntentionWildcard(name string) error {
	if name != WildcardSpecifier && strings.Contains(name, WildcardSpecifier) {
		return errors.New("Name: wildcard character '*' cannot be used with partial values")
	}
	return nil
}

// ToIntentions flattens the entry into one Intention per source, in the
// entry's (precedence) order.
func (e *ServiceIntentionsConfigEntry) ToIntentions() Intentions {
	out := make(Intentions, 0, len(e.Sources))
	for _, src := range e.Sources {
		if src != nil {
			out = append(out, e.ToIntention(src))
		}
	}
	return out
}

// ToIntention is the API view of one source of the entry, with the
// entry's indexes. A config-entry intention has the entry's Meta, no ID and
// no times; a legacy one its own ID, Meta and times.
func (e *ServiceIntentionsConfigEntry) ToIntention(src *SourceIntention) *Intention {
	ixn := &Intention{
		ID:              src.LegacyID,
		Description:     src.Description,
		SourceNS:        IntentionDefaultNamespace,
		SourceName:      src.Name,
		DestinationNS:   IntentionDefaultNamespace,
		DestinationName: e.Name,
		SourceType:      src.Type,
		Action:          src.Action,
		Permissions:     src.Permissions,
		Meta:            e.Meta,
		Precedence:      src.Precedence,
		RaftIndex:       e.RaftIndex,
	}
	if src.LegacyID != "" {
		ixn.Meta = src.LegacyMeta
	}
	if src.LegacyCreateTime != nil {
		ixn.CreatedAt = *src.LegacyCreateTime
	}
	if src.LegacyUpdateTime != nil {
		ixn.UpdatedAt = *src.LegacyUpdateTime
	}
	return ixn
}

// FindLegacySource returns the source whose legacy ID is id, or nil (also
// for "", which no legacy intention has).
func (e *ServiceIntentionsConfigEntry) FindLegacySource(id string) *SourceIntention {
	if id == "" {
		return nil
	}
	for _, src := range e.Sources {
		if src != nil && src.LegacyID == id {
			return src
		}
	}
	return nil
}

// LegacyIDsAllSet reports whether every source is a legacy intention: the
// ID-based API edits an entry only then, as Consul's.
func (e *ServiceIntentionsConfigEntry) LegacyIDsAllSet() bool {
	for _, src := range e.Sources {
		if src != nil && src.LegacyID == "" {
			return false
		}
	}
	return true
}

// FindSource returns the source named name, or nil.
func (e *ServiceIntentionsConfigEntry) FindSource(name string) *SourceIntention {
	for _, src := range e.Sources {
		if src != nil && src.Name == name {
			return src
		}
	}
	return nil
}

// UpsertSource replaces the source with the same name or appends it.
func (e *ServiceIntentionsConfigEntry) UpsertSource(src *SourceIntention) {
	for i, s := range e.Sources {
		if s != nil && s.Name == src.Name {
			e.Sources[i] = src
			return
		}
	}
	e.Sources = append(e.Sources, src)
}

// DeleteSource removes the source named name and reports whether it was
// there.
func (e *ServiceIntentionsConfigEntry) DeleteSource(name string) bool {
	for i, s := range e.Sources {
		if s != nil && s.Name == name {
			e.Sources = append(e.Sources[:i:i], e.Sources[i+1:]...)
			return true
		}
	}
	return false
}
