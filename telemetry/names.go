// Package telemetry names and serves the agent's metrics as Consul does:
// Consul's metric names ("consul.raft.apply", "consul_raft_apply" in
// Prometheus form), one client_golang registry holding everything, and
// Consul's JSON summary gathered from that registry.
//
// Two kinds of instrument feed the registry. hashicorp/raft and
// hashicorp/serf emit through go-metrics' process-wide global, which
// InstallSink points at a go-metrics Prometheus sink registered on the
// registry. Trellis's own code (the server's endpoints, autopilot, the xDS
// server) registers client_golang instruments directly, under the names in
// Definitions, so that each in-process server of a test has its own.
package telemetry

import "strings"

// Kind is how a metric aggregates, as Consul groups them in its JSON:
// gauges, counters and samples (timers, in milliseconds).
type Kind int

const (
	// Gauge is a value set from time to time.
	Gauge Kind = iota
	// Counter is a cumulative count.
	Counter
	// Timer is a sampled duration in milliseconds.
	Timer
)

// Definition is one metric Trellis emits under Consul's name.
type Definition struct {
	// Name is Consul's dotted name, e.g. "consul.raft.apply".
	Name string
	Kind Kind
	// Help is the Prometheus HELP text.
	Help string
	// Library is true when hashicorp/raft or serf emits the metric through
	// go-metrics rather than Trellis's own code.
	Library bool
}

// Definitions lists the metrics Trellis emits under Consul's names. The
// library-emitted ones are declared to the go-metrics sink up front so that
// they are served (at zero) before the first event and never expire.
func Definitions() []Definition {
	return []Definition{
		{Name: "consul.raft.apply", Kind: Counter, Library: true, Help: "Raft transactions applied by the leader."},
		{Name: "consul.raft.commitTime", Kind: Timer, Library: true, Help: "Time in ms the leader takes to commit a new entry to its log."},
		{Name: "consul.raft.leader.lastContact", Kind: Timer, Library: true, Help: "Time in ms since the leader last heard from each follower."},
		{Name: "consul.raft.state.leader", Kind: Counter, Library: true, Help: "Elections this server won."},
		{Name: "consul.raft.state.candidate", Kind: Counter, Library: true, Help: "Elections this server started."},
		{Name: "consul.raft.state.follower", Kind: Counter, Library: true, Help: "Times this server became a follower."},
		{Name: "consul.raft.barrier", Kind: Counter, Library: true, Help: "Raft barriers issued."},
		{Name: "consul.raft.fsm.apply", Kind: Timer, Library: true, Help: "Time in ms the FSM takes to apply a log entry."},
		{Name: "consul.serf.member.join", Kind: Counter, Library: true, Help: "Serf members that joined."},
		{Name: "consul.serf.member.left", Kind: Counter, Library: true, Help: "Serf members that left."},
		{Name: "consul.serf.member.failed", Kind: Counter, Library: true, Help: "Serf members marked failed."},
		{Name: "consul.serf.member.flap", Kind: Counter, Library: true, Help: "Serf members that failed and rejoined within the flap timeout."},
		{Name: "consul.serf.member.update", Kind: Counter, Library: true, Help: "Serf member updates (changed tags or address)."},
		{Name: "consul.rpc.request", Kind: Counter, Help: "Internal RPC requests this server received."},
		{Name: "consul.rpc.request_error", Kind: Counter, Help: "Internal RPC requests this server answered with an error."},
		{Name: "consul.kvs.apply", Kind: Timer, Help: "Time in ms to complete a KV update (KVS.Apply)."},
		{Name: "consul.catalog.register", Kind: Timer, Help: "Time in ms to complete a catalog registration (Catalog.Register)."},
		{Name: "consul.raft.last_index", Kind: Gauge, Help: "Index of the last entry in this server's Raft log."},
		{Name: "consul.raft.applied_index", Kind: Gauge, Help: "Index of the last Raft entry this server's FSM applied."},
		{Name: "consul.server.isLeader", Kind: Gauge, Help: "1 while this server is the Raft leader, else 0."},
		{Name: "consul.autopilot.healthy", Kind: Gauge, Help: "On the leader: 1 while autopilot judges every server healthy, else 0."},
		{Name: "consul.xds.server.streams", Kind: Gauge, Help: "Open xDS streams from Envoy proxies to this agent."},
	}
}

// Help returns the help text of the named definition ("" if none), so
// that instruments registered by Trellis's code share the table's text.
func Help(name string) string {
	for _, d := range Definitions() {
		if d.Name == name {
			return d.Help
		}
	}
	return ""
}

// PromName is a dotted metric name in Prometheus form, as go-metrics'
// Prometheus sink spells it: "consul.raft.commitTime" is
// "consul_raft_commitTime".
func PromName(dotted string) string {
	return strings.NewReplacer(".", "_", "-", "_", " ", "_").Replace(dotted)
}

// dottedNames maps Prometheus names back to Consul's dotted ones. The
// underscore form loses which underscores were dots, so the known names
// are looked up; any other name has every underscore read as a dot.
type dottedNames map[string]string

func newDottedNames() dottedNames {
	m := dottedNames{}
	for _, d := range Definitions() {
		m[PromName(d.Name)] = d.Name
	}
	return m
}

func (m dottedNames) dotted(prom string) string {
	if d, ok := m[prom]; ok {
		return d
	}
	return strings.ReplaceAll(prom, "_", ".")
}
