package bootstrap

import (
	"strings"

	metricsv3 "github.com/envoyproxy/go-control-plane/envoy/config/metrics/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// The stats tags turn Envoy's per-cluster and per-upstream stat names into
// tagged metrics (consul.destination.service="api", ...), with the same tag
// names and extraction rules as Consul, so that dashboards and alerts built
// for Consul's Envoys work unchanged. They rely on the naming the xDS
// generators follow:
//
//	clusters:  [hash~][subset.]service.namespace.[partition.]dc.internal.trust-domain.consul
//	upstreams: (tcp|http).upstream.service[.namespace][.partition].dc
//
// In Envoy's tag regexes the first capture group is the part stripped from
// the stat name and the second one is the tag value.

// segment is one dot- or tilde-separated field of a stat name.
type segment struct {
	tag      string // tag name suffix ("service"), empty when never a tag
	pre, suf string // separator before or after the field
	optional bool
}

// render writes the segment's regex, capturing the field when capture.
func (s segment) render(capture bool) string {
	field := `[^.]+`
	if capture {
		field = `([^.]+)`
	}
	body := s.pre + field + s.suf
	if s.optional {
		return `(?:` + body + `)?`
	}
	return body
}

// clusterSegments is an SNI-named cluster's stat prefix, in order.
func clusterSegments() []segment {
	return []segment{
		{tag: "custom_hash", suf: `~`, optional: true},
		{tag: "service_subset", suf: `\.`, optional: true},
		{tag: "service", suf: `\.`},
		{tag: "namespace", suf: `\.`},
		{tag: "partition", suf: `\.`, optional: true},
		{tag: "datacenter", suf: `\.`},
		{tag: "routing_type", suf: `\.`},
		{tag: "trust_domain", suf: `\.`},
	}
}

// upstreamSegments is an upstream listener's stat prefix, in order.
func upstreamSegments() []segment {
	return []segment{
		{tag: "service"},
		{tag: "namespace", pre: `\.`, optional: true},
		{tag: "partition", pre: `\.`, optional: true},
		{tag: "datacenter", pre: `\.`},
	}
}

// Indexes into clusterSegments of the last field of the two range tags.
const (
	targetEnd     = 5 // service..datacenter: [hash~][subset.]svc.ns.[ap.]dc
	fullTargetEnd = 7 // through the trust domain
)

// clusterRegex extracts one field (index i) of a cluster stat name.
func clusterRegex(prefix string, i int) string {
	var b strings.Builder
	b.WriteString(`^cluster\.` + prefix + `(`)
	for j, s := range clusterSegments() {
		b.WriteString(s.render(j == i))
	}
	b.WriteString(`consul\.)`)
	return b.String()
}

// clusterRangeRegex extracts fields 0..end (end required) as one value.
func clusterRangeRegex(prefix string, end int) string {
	segs := clusterSegments()
	var b strings.Builder
	b.WriteString(`^cluster\.` + prefix + `((`)
	for _, s := range segs[:end] {
		b.WriteString(s.render(false))
	}
	last := segs[end]
	b.WriteString(last.pre + `[^.]+)` + last.suf)
	for _, s := range segs[end+1:] {
		b.WriteString(s.render(false))
	}
	b.WriteString(`consul\.)`)
	return b.String()
}

// upstreamRegex extracts one field (index i) of an upstream stat name.
func upstreamRegex(i int) string {
	var b strings.Builder
	b.WriteString(`^(?:tcp|http)\.upstream\.(`)
	for j, s := range upstreamSegments() {
		b.WriteString(s.render(j == i))
	}
	b.WriteString(`\.)`)
	return b.String()
}

// clusterTags returns the tags of one family ("consul.destination." with
// the passthrough prefix, or the deprecated "consul.").
func clusterTags(tagPrefix, statPrefix string, withPartition bool) []*metricsv3.TagSpecifier {
	var out []*metricsv3.TagSpecifier
	for i, s := range clusterSegments() {
		if s.tag == "partition" && !withPartition {
			continue
		}
		out = append(out, regexTag(tagPrefix+s.tag, clusterRegex(statPrefix, i)))
	}
	return append(out,
		regexTag(tagPrefix+"target", clusterRangeRegex(statPrefix, targetEnd)),
		regexTag(tagPrefix+"full_target", clusterRangeRegex(statPrefix, fullTargetEnd)),
	)
}

func regexTag(name, re string) *metricsv3.TagSpecifier {
	return &metricsv3.TagSpecifier{TagName: name, TagValue: &metricsv3.TagSpecifier_Regex{Regex: re}}
}

func fixedTag(name, value string) *metricsv3.TagSpecifier {
	return &metricsv3.TagSpecifier{TagName: name, TagValue: &metricsv3.TagSpecifier_FixedValue{FixedValue: value}}
}

// statsTags returns every tag specifier, in Consul's order.
func statsTags(cfg Config) []*metricsv3.TagSpecifier {
	tags := clusterTags("consul.destination.", `(?:passthrough~)?`, true)
	up := upstreamSegments()
	for _, i := range []int{0, 3, 1, 2} { // Consul's order: service, datacenter, namespace, partition
		tags = append(tags, regexTag("consul.upstream."+up[i].tag, upstreamRegex(i)))
	}
	if !cfg.OmitDeprecatedTags {
		// Consul's pre-1.9 names, which it never had a partition tag for.
		tags = append(tags, clusterTags("consul.", "", false)...)
	}
	tags = append(tags,
		fixedTag("local_cluster", cfg.ProxyCluster),
		fixedTag("consul.source.service", cfg.ProxyCluster),
		fixedTag("consul.source.namespace", cfg.Namespace),
		fixedTag("consul.source.partition", cfg.Partition),
	)
	if cfg.Datacenter != "" {
		tags = append(tags, fixedTag("consul.source.datacenter", cfg.Datacenter))
	}
	return tags
}

func buildStatsConfig(cfg Config) *metricsv3.StatsConfig {
	return &metricsv3.StatsConfig{
		StatsTags:         statsTags(cfg),
		UseAllDefaultTags: wrapperspb.Bool(true),
	}
}
