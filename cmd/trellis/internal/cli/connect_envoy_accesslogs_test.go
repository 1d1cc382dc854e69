package cli

import (
	"testing"

	bootstrapv3 "github.com/envoyproxy/go-control-plane/envoy/config/bootstrap/v3"
	filev3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/file/v3"
	streamv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/access_loggers/stream/v3"
	"google.golang.org/protobuf/proto"
)

// adminLog checks the bootstrap's admin access log: one logger of the
// given typed config, with check applied to it.
func adminLog[T proto.Message](check func(t *testing.T, logger T)) func(*testing.T, *bootstrapv3.Bootstrap) {
	return func(t *testing.T, b *bootstrapv3.Bootstrap) {
		t.Helper()
		logs := b.GetAdmin().GetAccessLog()
		if len(logs) != 1 {
			t.Fatalf("admin access logs %v, want one", logs)
		}
		m, err := logs[0].GetTypedConfig().UnmarshalNew()
		if err != nil {
			t.Fatal(err)
		}
		logger, ok := m.(T)
		if !ok {
			t.Fatalf("admin access logger is %T", m)
		}
		check(t, logger)
	}
}

// TestConnectEnvoyAdminAccessLogs: proxy-defaults' AccessLogs, when they
// log, are the admin server's access log too (as Consul's `connect envoy`
// makes it); otherwise -admin-access-log-path is.
func TestConnectEnvoyAdminAccessLogs(t *testing.T) {
	args, getWeb := webSidecarBootstrap()
	withLogs := func(accessLogs string) map[string]reply {
		return map[string]reply{svcPath: {body: sidecarWithConfig("")},
			defsPath: {body: `{"Kind": "proxy-defaults", "Name": "global", "AccessLogs": ` + accessLogs + `}`}}
	}
	filePath := func(want string) func(*testing.T, *bootstrapv3.Bootstrap) {
		return adminLog(func(t *testing.T, l *filev3.FileAccessLog) {
			if l.GetPath() != want {
				t.Errorf("admin access log path %q, want %q", l.GetPath(), want)
			}
		})
	}
	runEnvoyCases(t, []envoyCase{
		{name: "no proxy-defaults: the flag's default", args: args, want: getWeb,
			routes: map[string]reply{svcPath: {body: sidecarWithConfig("")}},
			check:  filePath("/dev/null")},
		{name: "a file sink with Consul's default format", args: args, want: getWeb,
			routes: withLogs(`{"Enabled": true, "Type": "file", "Path": "/var/log/envoy/access.log"}`),
			check: adminLog(func(t *testing.T, l *filev3.FileAccessLog) {
				if l.GetPath() != "/var/log/envoy/access.log" || l.GetLogFormat().GetJsonFormat().GetFields()["start_time"] == nil {
					t.Errorf("admin access log %v, want the file with Consul's JSON format", l)
				}
			})},
		{name: "stdout with a text format", args: args, want: getWeb,
			routes: withLogs(`{"Enabled": true, "TextFormat": "MY START TIME %START_TIME%"}`),
			check: adminLog(func(t *testing.T, l *streamv3.StdoutAccessLog) {
				if got := l.GetLogFormat().GetTextFormatSource().GetInlineString(); got != "MY START TIME %START_TIME%\n" {
					t.Errorf("admin access log format %q", got)
				}
			})},
		{name: "they win over the flag, with Consul's warning", args: append(args, "-admin-access-log-path", "/tmp/admin.log"), want: getWeb,
			routes:    withLogs(`{"Enabled": true, "Type": "stderr"}`),
			check:     adminLog(func(*testing.T, *streamv3.StderrAccessLog) {}),
			stderrHas: []string{"Ignoring the deprecated -admin-access-log-path flag."}},
		{name: "disabled: the flag", args: append(args, "-admin-access-log-path", "/tmp/admin.log"), want: getWeb,
			routes: withLogs(`{"Enabled": false, "Type": "stderr"}`),
			check:  filePath("/tmp/admin.log")},
	})
}
