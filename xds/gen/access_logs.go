package gen

import (
	"strings"

	accesslogv3 "github.com/envoyproxy/go-control-plane/envoy/config/accesslog/v3"
	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/trellis-mesh/trellis/structs"
)

// Access logs, as Consul's agent/xds/accesslogs makes them from
// proxy-defaults' AccessLogs: one logger per connection manager and
// tcp_proxy of every proxy kind (sidecars and ingress, terminating and
// mesh gateways alike, as in Consul), and one per listener (unless
// DisableListenerLogs) that logs only the connections no filter chain
// matched. The sink (stdout, stderr or a file) is picked by the typed
// config: envoy.access_loggers.stdout, .stderr (the stream extension) or
// envoy.access_loggers.file.

// Consul's names for the two kinds of access log (Envoy picks the logger
// by the typed config; the name only tells them apart in config dumps).
const (
	filterAccessLogName   = "Consul Listener Filter Log"
	listenerAccessLogName = "Consul Listener Log"
	// noRouteFlag is Envoy's response flag for "no route", which covers a
	// connection that matches no filter chain of the listener.
	noRouteFlag = "NR"
)

// defaultAccessLogFormat is Consul's default JSON format: used when
// neither JSONFormat nor TextFormat is set. Pairs, not a map, so the
// Struct is built without parsing JSON on every generation.
var defaultAccessLogFormat = [...][2]string{
	{"start_time", "%START_TIME%"},
	{"route_name", "%ROUTE_NAME%"},
	{"method", "%REQ(:METHOD)%"},
	{"path", "%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%"},
	{"protocol", "%PROTOCOL%"},
	{"response_code", "%RESPONSE_CODE%"},
	{"response_flags", "%RESPONSE_FLAGS%"},
	{"response_code_details", "%RESPONSE_CODE_DETAILS%"},
	{"connection_termination_details", "%CONNECTION_TERMINATION_DETAILS%"},
	{"bytes_received", "%BYTES_RECEIVED%"},
	{"bytes_sent", "%BYTES_SENT%"},
	{"duration", "%DURATION%"},
	{"upstream_service_time", "%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)%"},
	{"x_forwarded_for", "%REQ(X-FORWARDED-FOR)%"},
	{"user_agent", "%REQ(USER-AGENT)%"},
	{"request_id", "%REQ(X-REQUEST-ID)%"},
	{"authority", "%REQ(:AUTHORITY)%"},
	{"upstream_host", "%UPSTREAM_HOST%"},
	{"upstream_cluster", "%UPSTREAM_CLUSTER%"},
	{"upstream_local_address", "%UPSTREAM_LOCAL_ADDRESS%"},
	{"downstream_local_address", "%DOWNSTREAM_LOCAL_ADDRESS%"},
	{"downstream_remote_address", "%DOWNSTREAM_REMOTE_ADDRESS%"},
	{"requested_server_name", "%REQUESTED_SERVER_NAME%"},
	{"upstream_transport_failure_reason", "%UPSTREAM_TRANSPORT_FAILURE_REASON%"},
}

// proxyAccessLogs is the proxy's access-log configuration, whatever its
// kind: the AccessLogs of its resolved service config (proxy-defaults'),
// nil when the snapshot has none (yet: gateways are delivered before
// their config is known, and then log nothing until it is).
func (b *builder) proxyAccessLogs() *structs.AccessLogsConfig {
	var sc *structs.ServiceConfigResponse
	switch s := b.snap; {
	case s.ConnectProxy != nil:
		sc = s.ConnectProxy.ServiceConfig
	case s.IngressGateway != nil:
		sc = s.IngressGateway.ServiceConfig
	case s.TerminatingGateway != nil:
		sc = s.TerminatingGateway.ServiceConfig
	case s.MeshGateway != nil:
		sc = s.MeshGateway.ServiceConfig
	}
	if sc == nil {
		return nil
	}
	return &sc.AccessLogs
}

// filterAccessLogs is what a proxy's connection managers and tcp_proxy
// filters log with; nil when access logs are off.
func (b *builder) filterAccessLogs() []*accesslogv3.AccessLog {
	return b.accessLogs(b.proxyAccessLogs(), false)
}

// listenerAccessLogs is what a proxy's listeners log with; nil when
// access logs or listener logs are off.
func (b *builder) listenerAccessLogs() []*accesslogv3.AccessLog {
	return b.accessLogs(b.proxyAccessLogs(), true)
}

// AccessLogs returns the access log proxy-defaults' AccessLogs c gives a
// connection manager or tcp_proxy, which is also what Consul's `connect
// envoy` puts on the bootstrap's admin server; nil when c is nil, disabled
// or cannot be built (see accessLogs).
func AccessLogs(c *structs.AccessLogsConfig) ([]*accesslogv3.AccessLog, error) {
	var b builder
	logs := b.accessLogs(c, false)
	return logs, b.err
}

// accessLogs builds the access log of a filter or, with listener set, of
// a listener. A configuration that cannot be built (a JSONFormat that is
// JSON but not an object, which the entry's validation lets through as
// Consul's does, or a type written before validation existed) gets no
// access log: as in Consul, logging is not worth failing the proxy's
// configuration for.
func (b *builder) accessLogs(c *structs.AccessLogsConfig, listener bool) []*accesslogv3.AccessLog {
	if c == nil || !c.Enabled || (listener && c.DisableListenerLogs) {
		return nil
	}
	format, ok := accessLogFormat(c)
	if !ok {
		return nil
	}
	var logger proto.Message
	switch c.Type {
	case structs.DefaultLogSinkType, structs.StdOutLogSinkType:
		logger = &streamv3.StdoutAccessLog{AccessLogFormat: &streamv3.StdoutAccessLog_LogFormat{LogFormat: format}}
	case structs.StdErrLogSinkType:
		logger = &streamv3.StderrAccessLog{AccessLogFormat: &streamv3.StderrAccessLog_LogFormat{LogFormat: format}}
	case structs.FileLogSinkType:
		logger = &filev3.FileAccessLog{Path: c.Path, AccessLogFormat: &filev3.FileAccessLog_LogFormat{LogFormat: format}}
	default:
		return nil
	}
	l := &accesslogv3.AccessLog{
		Name:       filterAccessLogName,
		ConfigType: &accesslogv3.AccessLog_TypedConfig{TypedConfig: b.any(logger)},
	}
	if listener {
		l.Name = listenerAccessLogName
		l.Filter = &accesslogv3.AccessLogFilter{FilterSpecifier: &accesslogv3.AccessLogFilter_ResponseFlagFilter{
			ResponseFlagFilter: &accesslogv3.ResponseFlagFilter{Flags: []string{noRouteFlag}},
		}}
	}
	return []*accesslogv3.AccessLog{l}
}

// accessLogFormat is the log line's format: the JSONFormat object, the
// TextFormat string (with the trailing newline Envoy does not add), or
// Consul's default JSON format. ok is false for a JSONFormat that is not
// a JSON object.
func accessLogFormat(c *structs.AccessLogsConfig) (*corev3.SubstitutionFormatString, bool) {
	switch {
	case c.JSONFormat != "":
		var s structpb.Struct
		if err := s.UnmarshalJSON([]byte(c.JSONFormat)); err != nil {
			return nil, false
		}
		return jsonFormat(&s), true
	case c.TextFormat != "":
		text := c.TextFormat
		if !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		return &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_TextFormatSource{
			TextFormatSource: &corev3.DataSource{Specifier: &corev3.DataSource_InlineString{InlineString: text}},
		}}, true
	}
	fields := make(map[string]*structpb.Value, len(defaultAccessLogFormat))
	for _, kv := range defaultAccessLogFormat {
		fields[kv[0]] = structpb.NewStringValue(kv[1])
	}
	return jsonFormat(&structpb.Struct{Fields: fields}), true
}

func jsonFormat(s *structpb.Struct) *corev3.SubstitutionFormatString {
	return &corev3.SubstitutionFormatString{Format: &corev3.SubstitutionFormatString_JsonFormat{JsonFormat: s}}
}
