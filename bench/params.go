package bench

import (
	"fmt"
	"time"
)

// Target is one Consul-compatible agent to measure.
type Target struct {
	// Name labels the target's column and its RESULT entry ("trellis",
	// "consul"); empty means HTTPAddr.
	Name string
	// HTTPAddr is the agent's HTTP API, host:port.
	HTTPAddr string
	// GRPCAddr is the agent's xDS gRPC port, host:port (xds only).
	GRPCAddr string
	// PID is the target's process, whose RSS and CPU are read from /proc;
	// 0 leaves those figures out.
	PID int
	// Token is sent as X-Consul-Token and x-consul-token, when not empty.
	Token string
}

func (t Target) label() string {
	if t.Name != "" {
		return t.Name
	}
	return t.HTTPAddr
}

// Params sizes every benchmark. Scales gives the named sets; a test may
// build its own.
type Params struct {
	// Writes: catalog registrations, by Writers concurrent writers.
	Registrations int `json:"registrations"`
	Writers       int `json:"writers"`
	// KV: 256-byte puts by Writers; then CASWriters each trying CASRounds
	// check-and-set updates of one key.
	Puts       int `json:"puts"`
	CASWriters int `json:"cas_writers"`
	CASRounds  int `json:"cas_rounds"`
	// Blocking: watchers of one service.
	Watchers int `json:"watchers"`
	// XDS: Backends services of two instances each, Frontends sidecars
	// of Upstreams upstreams each (one Envoy stream each), Changes
	// endpoint changes.
	Backends  int `json:"backends"`
	Frontends int `json:"frontends"`
	Upstreams int `json:"upstreams"`
	Changes   int `json:"changes"`
	// Wait bounds every wait for the target (a first config, one change,
	// the blocking queries' return): past it, what did not arrive is
	// counted as missed.
	Wait time.Duration `json:"wait_ns"`
}

// Scales are the sizes -scale names. "tiny" is for smoke tests: it shows
// that every benchmark runs, not what a target can do.
func Scales() map[string]Params {
	return map[string]Params{
		"tiny": {Registrations: 20, Writers: 2, Puts: 20, CASWriters: 2, CASRounds: 5, Watchers: 3,
			Backends: 2, Frontends: 2, Upstreams: 1, Changes: 2, Wait: 20 * time.Second},
		"small": {Registrations: 2000, Writers: 8, Puts: 2000, CASWriters: 8, CASRounds: 50, Watchers: 100,
			Backends: 5, Frontends: 50, Upstreams: 3, Changes: 40, Wait: time.Minute},
		"medium": {Registrations: 10000, Writers: 32, Puts: 10000, CASWriters: 16, CASRounds: 100, Watchers: 500,
			Backends: 50, Frontends: 200, Upstreams: 5, Changes: 100, Wait: 2 * time.Minute},
		"large": {Registrations: 50000, Writers: 64, Puts: 50000, CASWriters: 32, CASRounds: 100, Watchers: 1000,
			Backends: 1000, Frontends: 5000, Upstreams: 5, Changes: 200, Wait: 5 * time.Minute},
	}
}

// ScaleParams returns the Params of a named scale.
func ScaleParams(scale string) (Params, error) {
	p, ok := Scales()[scale]
	if !ok {
		return Params{}, fmt.Errorf("%w: scale %q (want tiny, small, medium or large)", ErrInvalidParams, scale)
	}
	return p, nil
}

func (p Params) check(bench string) error {
	bad := func(field string, v int) error {
		return fmt.Errorf("%w: %s needs %s >= 1, got %d", ErrInvalidParams, bench, field, v)
	}
	type req struct {
		name string
		v    int
	}
	var reqs []req
	switch bench {
	case "writes":
		reqs = []req{{"registrations", p.Registrations}, {"writers", p.Writers}}
	case "kv":
		reqs = []req{{"puts", p.Puts}, {"writers", p.Writers}, {"cas_writers", p.CASWriters}, {"cas_rounds", p.CASRounds}}
	case "blocking":
		reqs = []req{{"watchers", p.Watchers}}
	case "xds":
		reqs = []req{{"backends", p.Backends}, {"frontends", p.Frontends}, {"upstreams", p.Upstreams}, {"changes", p.Changes}}
		if p.Upstreams > p.Backends {
			return fmt.Errorf("%w: xds needs upstreams <= backends, got %d > %d", ErrInvalidParams, p.Upstreams, p.Backends)
		}
	}
	for _, r := range reqs {
		if r.v < 1 {
			return bad(r.name, r.v)
		}
	}
	if p.Wait <= 0 {
		return fmt.Errorf("%w: %s needs a positive wait", ErrInvalidParams, bench)
	}
	return nil
}
