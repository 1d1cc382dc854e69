package structs

import (
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"time"
)

// IntentionAction is what an intention (or an L7 permission) does with a
// matching connection or request.
type IntentionAction string

// Intention actions.
const (
	IntentionActionAllow IntentionAction = "allow"
	IntentionActionDeny  IntentionAction = "deny"
)

// IntentionSourceType is the type of an intention's source; only Consul
// services exist.
type IntentionSourceType string

// IntentionSourceConsul is a service in the catalog.
const IntentionSourceConsul IntentionSourceType = "consul"

// IntentionMatchType says whether a match query matches sources or
// destinations.
type IntentionMatchType string

// Intention match types.
const (
	IntentionMatchSource      IntentionMatchType = "source"
	IntentionMatchDestination IntentionMatchType = "destination"
)

// Intention is the API view of one source of a service-intentions entry
// (the shape of /v1/connect/intentions). Intentions stored as config
// entries have no ID and zero times; those written through the ID-based
// API have an ID, their own Meta and times. The indexes are the entry's.
type Intention struct {
	ID              string `json:",omitempty"`
	Description     string `json:",omitempty"`
	SourceNS        string
	SourceName      string
	DestinationNS   string
	DestinationName string
	SourceType      IntentionSourceType
	Action          IntentionAction        `json:",omitempty"`
	Permissions     []*IntentionPermission `json:",omitempty"`
	Meta            map[string]string      `json:",omitempty"`
	Precedence      int
	// CreatedAt and UpdatedAt are a legacy intention's times (UTC), zero
	// (and left out of the JSON) for a config-entry intention.
	CreatedAt, UpdatedAt time.Time
	RaftIndex            `bexpr:"-"`
}

// Intentions is a list of intentions.
type Intentions []*Intention

// String renders the intention as Consul's CLI does: "web => db (allow)".
func (x *Intention) String() string {
	detail := string(x.Action)
	switch n := len(x.Permissions); {
	case n == 1:
		detail = "1 permission"
	case n > 1:
		detail = fmt.Sprintf("%d permissions", n)
	}
	return fmt.Sprintf("%s => %s (%s)", x.SourceName, x.DestinationName, detail)
}

// MarshalJSON leaves out zero CreatedAt and UpdatedAt, as Consul does: an
// intention stored as a config-entry source has neither field.
func (x Intention) MarshalJSON() ([]byte, error) {
	type plain Intention // without this method
	out := struct {
		plain
		CreatedAt *time.Time `json:",omitempty"`
		UpdatedAt *time.Time `json:",omitempty"`
	}{plain: plain(x)}
	if !x.CreatedAt.IsZero() {
		out.CreatedAt = &x.CreatedAt
	}
	if !x.UpdatedAt.IsZero() {
		out.UpdatedAt = &x.UpdatedAt
	}
	return json.Marshal(out)
}

// ToLegacySource converts the API view to the source a legacy intention
// is stored as, with the given times (the server's: whatever times the
// client sent are ignored).
func (x *Intention) ToLegacySource(created, updated time.Time) *SourceIntention {
	src := x.ToSourceIntention()
	src.LegacyID = x.ID
	src.LegacyMeta = maps.Clone(x.Meta)
	src.LegacyCreateTime, src.LegacyUpdateTime = &created, &updated
	return src
}

// ToSourceIntention converts the API view to the source it is stored as.
func (x *Intention) ToSourceIntention() *SourceIntention {
	return &SourceIntention{
		Name:        x.SourceName,
		Action:      x.Action,
		Permissions: x.Permissions,
		Type:        x.SourceType,
		Description: x.Description,
	}
}

// SortIntentions orders intentions as Consul evaluates them: by precedence,
// highest first, then by (source, destination) so the order is stable.
func SortIntentions(ixns Intentions) {
	sort.SliceStable(ixns, func(i, j int) bool {
		a, b := ixns[i], ixns[j]
		if a.Precedence != b.Precedence {
			return a.Precedence > b.Precedence
		}
		if a.SourceNS != b.SourceNS {
			return a.SourceNS < b.SourceNS
		}
		if a.SourceName != b.SourceName {
			return a.SourceName < b.SourceName
		}
		if a.DestinationNS != b.DestinationNS {
			return a.DestinationNS < b.DestinationNS
		}
		return a.DestinationName < b.DestinationName
	})
}

// IntentionOp is an intention write verb.
type IntentionOp string

// Intention verbs. Upsert and delete name the intention by its source and
// destination (the /v1/connect/intentions/exact endpoint); create, update
// and delete with an ID are the deprecated ID-based API's
// (/v1/connect/intentions/<id>), which only edits entries whose every
// source it created.
const (
	IntentionOpUpsert IntentionOp = "upsert"
	IntentionOpDelete IntentionOp = "delete"
	IntentionOpCreate IntentionOp = "create"
	IntentionOpUpdate IntentionOp = "update"
)

// IntentionRequest writes one intention: the argument of Intention.Apply.
// The server turns it into a write of the destination's service-intentions
// entry.
type IntentionRequest struct {
	Op        IntentionOp
	Intention *Intention
	WriteRequest
}

// IntentionQueryExact names one intention by source and destination.
type IntentionQueryExact struct {
	SourceName      string
	DestinationName string
}

// IntentionQueryMatch asks for the intentions that apply to each of Names
// as a source or as a destination (wildcards included).
type IntentionQueryMatch struct {
	Type  IntentionMatchType
	Names []string
}

// IntentionQueryCheck asks whether Source may connect to Destination.
type IntentionQueryCheck struct {
	SourceName      string
	DestinationName string
	SourceType      IntentionSourceType
}

// IntentionQueryRequest is the argument of Intention.Get (IntentionID or
// Exact), Intention.Match (Match) and Intention.Check (Check).
type IntentionQueryRequest struct {
	// IntentionID names a legacy intention by its ID.
	IntentionID string
	Exact       *IntentionQueryExact
	Match       *IntentionQueryMatch
	Check       *IntentionQueryCheck
	QueryOptions
}

// IndexedIntentions is a read result of intentions.
type IndexedIntentions struct {
	Intentions Intentions
	QueryMeta
}

// IndexedIntentionMatches holds, for each name of a match query in order,
// the matching intentions by precedence.
type IndexedIntentionMatches struct {
	Matches []Intentions
	QueryMeta
}

// IntentionQueryCheckResponse is the result of a check.
type IntentionQueryCheckResponse struct {
	Allowed bool
}
