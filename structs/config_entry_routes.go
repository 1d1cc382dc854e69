package structs

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// HTTPRouteConfigEntry (kind http-route) routes HTTP requests arriving at
// API gateway listeners (its Parents) to services. Stored and served only:
// see config_entry_apigateway.go.
type HTTPRouteConfigEntry struct {
	Kind      string
	Name      string
	Parents   []ResourceReference
	Rules     []HTTPRouteRule
	Hostnames []string
	Meta      map[string]string `json:",omitempty"`
	// Status is always empty: Trellis runs no gateway controller.
	Status ConfigEntryStatus
	RaftIndex
}

// HTTPRouteRule matches requests and sends them to services.
type HTTPRouteRule struct {
	Filters         HTTPFilters
	ResponseFilters HTTPResponseFilters
	Matches         []HTTPMatch
	Services        []HTTPService
}

// HTTPMatch is one set of request criteria; all of them must hold.
type HTTPMatch struct {
	Headers []HTTPHeaderMatch
	// Method is an HTTP method, uppercased on write; "" matches any.
	Method string
	Path   HTTPPathMatch
	Query  []HTTPQueryMatch
}

// HTTPHeaderMatch matches one request header.
type HTTPHeaderMatch struct {
	// Match is exact, prefix, present, regex or suffix.
	Match  string
	Name   string
	Value  string
	Invert bool `json:",omitempty"`
}

// HTTPPathMatch matches the request path.
type HTTPPathMatch struct {
	// Match is exact, prefix or regex.
	Match string
	Value string
}

// HTTPQueryMatch matches one query parameter.
type HTTPQueryMatch struct {
	// Match is exact, present or regex.
	Match string
	Name  string
	Value string
}

// HTTPFilters change a request on its way to a service.
type HTTPFilters struct {
	Headers       []HTTPHeaderFilter
	URLRewrite    *URLRewrite
	RetryFilter   *RetryFilter
	TimeoutFilter *TimeoutFilter
	JWT           *JWTFilter
	ExtProc       []ExtProcFilter
	ExtAuthz      *HTTPRouteExtAuthzFilter
}

// HTTPResponseFilters change a response on its way back.
type HTTPResponseFilters struct {
	Headers []HTTPHeaderFilter
}

// HTTPHeaderFilter adds, sets and removes headers.
type HTTPHeaderFilter struct {
	Add    map[string]string
	Remove []string
	Set    map[string]string
}

// URLRewrite replaces the matched path prefix.
type URLRewrite struct {
	Path string
}

// RetryFilter retries failed requests.
type RetryFilter struct {
	NumRetries            uint32
	RetryOn               []string
	RetryOnStatusCodes    []uint32
	RetryOnConnectFailure bool
}

// TimeoutFilter bounds a request. Durations are nanoseconds in JSON.
type TimeoutFilter struct {
	RequestTimeout time.Duration
	IdleTimeout    time.Duration
}

// JWTFilter requires JWTs from the providers.
type JWTFilter struct {
	Providers []*IntentionJWTProvider `json:",omitempty"`
}

// ExtProcFilter sends requests through an external processor.
type ExtProcFilter struct {
	StatPrefix string            `json:",omitempty"`
	Mode       string            `json:",omitempty"`
	Overrides  *ExtProcOverrides `json:",omitempty"`
}

// ExtProcOverrides overrides an external processor's settings.
type ExtProcOverrides struct {
	Processing *ExtProcProcessing `json:",omitempty"`
}

// ExtProcProcessing says what is sent to an external processor.
type ExtProcProcessing struct {
	Request  *ExtProcProcessingDirection `json:",omitempty"`
	Response *ExtProcProcessingDirection `json:",omitempty"`
}

// ExtProcProcessingDirection is what is sent for one direction.
type ExtProcProcessingDirection struct {
	HeadersMode  string `json:",omitempty"`
	BodyMode     string `json:",omitempty"`
	TrailersMode string `json:",omitempty"`
	MaxBodyBytes int64  `json:",omitempty"`
}

// HTTPRouteExtAuthzFilter turns external authorization on for a route.
type HTTPRouteExtAuthzFilter struct {
	Enabled bool
}

// HTTPService is a destination of a rule, with its share of requests.
type HTTPService struct {
	Name            string
	Weight          int
	Filters         HTTPFilters
	ResponseFilters HTTPResponseFilters
	TLS             *GatewayServiceTLSConfig `json:",omitempty"`
	Limits          *UpstreamLimits          `json:",omitempty"`
	Partition       string                   `json:",omitempty"`
	Namespace       string                   `json:",omitempty"`
}

// The match types of http-route rules, Consul's.
var (
	httpPathMatchTypes   = []string{"exact", "prefix", "regex"}
	httpHeaderMatchTypes = []string{"exact", "prefix", "present", "regex", "suffix"}
	httpQueryMatchTypes  = []string{"exact", "present", "regex"}
)

// GetKind implements ConfigEntry.
func (e *HTTPRouteConfigEntry) GetKind() string { return HTTPRoute }

// GetName implements ConfigEntry.
func (e *HTTPRouteConfigEntry) GetName() string { return e.Name }

// GetMeta implements ConfigEntry.
func (e *HTTPRouteConfigEntry) GetMeta() map[string]string { return e.Meta }

// GetRaftIndex implements ConfigEntry.
func (e *HTTPRouteConfigEntry) GetRaftIndex() *RaftIndex { return &e.RaftIndex }

// Normalize implements ConfigEntry: parents without a kind are API
// gateways, methods are uppercased, and a client's Status is dropped.
func (e *HTTPRouteConfigEntry) Normalize() error {
	e.Kind = HTTPRoute
	e.Status = ConfigEntryStatus{}
	for i := range e.Parents {
		if e.Parents[i].Kind == "" {
			e.Parents[i].Kind = APIGateway
		}
	}
	for i := range e.Rules {
		for j := range e.Rules[i].Matches {
			m := &e.Rules[i].Matches[j]
			m.Method = strings.ToUpper(m.Method)
		}
	}
	return nil
}

// Validate implements ConfigEntry.
func (e *HTTPRouteConfigEntry) Validate() error {
	if e.Name == "" {
		return errors.New("Name is required")
	}
	if err := validateConfigEntryMeta(e.Meta); err != nil {
		return err
	}
	for i, p := range e.Parents {
		if p.Kind != APIGateway {
			return fmt.Errorf("Parents[%d]: unsupported parent kind %q, must be %q", i, p.Kind, APIGateway)
		}
		if p.Name == "" {
			return fmt.Errorf("Parents[%d]: Name is required", i)
		}
	}
	for i, h := range e.Hostnames {
		if err := validateWildcardHost(h); err != nil {
			return fmt.Errorf("Hostnames[%d]: %w", i, err)
		}
	}
	for i, r := range e.Rules {
		if err := r.validate(); err != nil {
			return fmt.Errorf("Rules[%d].%w", i, err)
		}
	}
	return nil
}

func (r *HTTPRouteRule) validate() error {
	for i, m := range r.Matches {
		at := fmt.Sprintf("Matches[%d]", i)
		if m.Method != "" && !isValidHTTPMethod(m.Method) {
			return fmt.Errorf("%s.Method: %q is not an HTTP method", at, m.Method)
		}
		if m.Path.Match != "" || m.Path.Value != "" {
			if !slices.Contains(httpPathMatchTypes, m.Path.Match) {
				return fmt.Errorf("%s.Path.Match: %q must be one of %s", at, m.Path.Match, strings.Join(httpPathMatchTypes, ", "))
			}
			if m.Path.Match != "regex" && !strings.HasPrefix(m.Path.Value, "/") {
				return fmt.Errorf("%s.Path.Value: %q must begin with '/'", at, m.Path.Value)
			}
		}
		for j, h := range m.Headers {
			if !slices.Contains(httpHeaderMatchTypes, h.Match) {
				return fmt.Errorf("%s.Headers[%d].Match: %q must be one of %s", at, j, h.Match, strings.Join(httpHeaderMatchTypes, ", "))
			}
			if h.Name == "" {
				return fmt.Errorf("%s.Headers[%d].Name is required", at, j)
			}
		}
		for j, q := range m.Query {
			if !slices.Contains(httpQueryMatchTypes, q.Match) {
				return fmt.Errorf("%s.Query[%d].Match: %q must be one of %s", at, j, q.Match, strings.Join(httpQueryMatchTypes, ", "))
			}
			if q.Name == "" {
				return fmt.Errorf("%s.Query[%d].Name is required", at, j)
			}
		}
	}
	if err := r.Filters.validate("Filters"); err != nil {
		return err
	}
	for i, s := range r.Services {
		at := fmt.Sprintf("Services[%d]", i)
		if s.Name == "" {
			return fmt.Errorf("%s.Name is required", at)
		}
		if s.Weight < 0 {
			return fmt.Errorf("%s.Weight: %d must not be negative", at, s.Weight)
		}
		if err := s.Filters.validate(at + ".Filters"); err != nil {
			return err
		}
	}
	return nil
}

func (f *HTTPFilters) validate(at string) error {
	if f.JWT != nil {
		if err := validateJWTProviderRefs(f.JWT.Providers); err != nil {
			return fmt.Errorf("%s.JWT.%w", at, err)
		}
	}
	if f.RetryFilter != nil {
		for _, c := range f.RetryFilter.RetryOnStatusCodes {
			if c < 100 || c > 599 {
				return fmt.Errorf("%s.RetryFilter.RetryOnStatusCodes: %d is not an HTTP status code", at, c)
			}
		}
	}
	if t := f.TimeoutFilter; t != nil && (t.RequestTimeout < 0 || t.IdleTimeout < 0) {
		return fmt.Errorf("%s.TimeoutFilter: timeouts must not be negative", at)
	}
	return nil
}
