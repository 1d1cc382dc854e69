package structs

import (
	"encoding/json"
	"testing"
)

// TestConnectProxyConfigJSON: a zero TransparentProxy is left out, as
// Consul's encoding leaves it out; a set one is kept.
func TestConnectProxyConfigJSON(t *testing.T) {
	cases := []struct {
		name string
		in   ConnectProxyConfig
		want string
	}{
		{name: "zero", in: ConnectProxyConfig{}, want: `{"MeshGateway":{},"Expose":{}}`},
		{name: "transparent", in: ConnectProxyConfig{Mode: ProxyModeTransparent, TransparentProxy: TransparentProxyConfig{OutboundListenerPort: 15001}},
			want: `{"Mode":"transparent","MeshGateway":{},"Expose":{},"TransparentProxy":{"OutboundListenerPort":15001}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, err := json.Marshal(tc.in)
			if err != nil || string(b) != tc.want {
				t.Fatalf("got %s %v, want %s", b, err, tc.want)
			}
			var back ConnectProxyConfig
			if err := json.Unmarshal(b, &back); err != nil || back.TransparentProxy != tc.in.TransparentProxy {
				t.Fatalf("round trip: %+v %v", back, err)
			}
		})
	}
}
