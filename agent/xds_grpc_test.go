package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/xds"
	"google.golang.org/protobuf/types/known/emptypb"

	xdsserver "github.com/trellis-mesh/trellis/xds"
	"github.com/trellis-mesh/trellis/xds/gen"
)

// grpcBackend is a gRPC server on 127.0.0.1 that answers every method
// with an empty message and its name in the "backend" header.
type grpcBackend struct {
	name string
	port int
	srv  *grpc.Server
	wg   sync.WaitGroup
}

func startGRPCBackend(t *testing.T, name string) *grpcBackend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &grpcBackend{name: name, port: ln.Addr().(*net.TCPAddr).Port}
	b.srv = grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		if err := ss.RecvMsg(&emptypb.Empty{}); err != nil {
			return err
		}
		if err := ss.SetHeader(metadata.Pairs("backend", name)); err != nil {
			return err
		}
		return ss.SendMsg(&emptypb.Empty{})
	}))
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		_ = b.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		b.srv.Stop()
		b.wg.Wait()
	})
	return b
}

// grpcBootstrap is the xDS bootstrap of a Connect-native application with
// service ID id, pointing at an agent's gRPC port, with plaintext
// credentials toward the agent. gRPC refuses clusters whose TLS names a
// certificate provider the bootstrap lacks, even on a channel without xDS
// credentials, so it has the instance; its files are read only by xDS
// credentials, which this plaintext test does not use.
func grpcBootstrap(grpcAddr, id, service, certDir string) []byte {
	return fmt.Appendf(nil, `{
  "xds_servers": [{"server_uri": %q, "channel_creds": [{"type": "insecure"}], "server_features": ["xds_v3", "ignore_resource_deletion"]}],
  "node": {"id": %q, "cluster": %q, "metadata": {"TRELLIS_GRPC": "true", "namespace": "default", "partition": "default"}},
  "certificate_providers": {%q: {"plugin_name": "file_watcher", "config": {
    "certificate_file": %q, "private_key_file": %q, "ca_certificate_file": %q, "refresh_interval": "60s"}}}
}`, grpcAddr, id, service, gen.GRPCCertProviderInstance,
		filepath.Join(certDir, "leaf.pem"), filepath.Join(certDir, "leaf-key.pem"), filepath.Join(certDir, "roots.pem"))
}

// proxylessClient registers the Connect-native web-1 and returns its
// xDS resolver and a channel to xds:///api through it, closed when the
// test ends.
func proxylessClient(t *testing.T, a *Agent, url string) (resolver.Builder, *grpc.ClientConn) {
	t.Helper()
	if code, out := put(t, url+"/v1/agent/service/register", `{"ID":"web-1","Name":"web","Port":8080,"Connect":{"Native":true}}`); code != http.StatusOK {
		t.Fatalf("register web: %d %s", code, out)
	}
	res, err := xds.NewXDSResolverWithConfigForTesting(grpcBootstrap(a.rc.GRPCListenAddrs()[0], "web-1", "web", t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	conn, err := grpc.NewClient("xds:///api", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return res, conn
}

// waitLeader waits until the agent at url knows a leader.
func waitLeader(t *testing.T, url string) {
	t.Helper()
	waitFor(t, "a leader", func() bool {
		code, body := get(t, url+"/v1/status/leader")
		return code == 200 && body != `""`
	})
}

// spread makes n RPCs through conn and counts them by backend.
func spread(conn *grpc.ClientConn, n int) (map[string]int, error) {
	seen := map[string]int{}
	for range n {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := call(ctx, conn)
		cancel()
		if err != nil {
			return seen, err
		}
		seen[b]++
	}
	return seen, nil
}

// call makes one RPC through conn and returns the backend that answered.
func call(ctx context.Context, conn *grpc.ClientConn) (string, error) {
	var md metadata.MD
	err := conn.Invoke(ctx, "/trellis.test.Echo/Hello", &emptypb.Empty{}, &emptypb.Empty{}, grpc.Header(&md))
	if err != nil {
		return "", err
	}
	return strings.Join(md.Get("backend"), ","), nil
}

// grpc-go's own xDS resolver and balancers, against a -dev agent: a
// Connect-native client dials xds:///api, its RPCs reach both Connect-
// native api instances, and a deregistration moves every RPC to the one
// left. A name nothing is registered under does not exist.
func TestProxylessGRPCClient(t *testing.T) {
	a, url, _ := devAgent(t)
	waitLeader(t, url)
	backends := []*grpcBackend{startGRPCBackend(t, "api-1"), startGRPCBackend(t, "api-2")}
	for _, b := range backends {
		body := fmt.Sprintf(`{"ID":%q,"Name":"api","Address":"127.0.0.1","Port":%d,"Connect":{"Native":true}}`, b.name, b.port)
		if code, out := put(t, url+"/v1/agent/service/register", body); code != http.StatusOK {
			t.Fatalf("register %s: %d %s", b.name, code, out)
		}
	}
	res, conn := proxylessClient(t, a, url)

	deadline := time.Now().Add(30 * time.Second)
	for {
		seen, err := spread(conn, 20)
		if err == nil && seen["api-1"] > 0 && seen["api-2"] > 0 {
			break
		}
		if time.Now().After(deadline) {
			_, status := get(t, url+"/v1/agent/proxy-status/web-1")
			t.Fatalf("RPCs never reached both backends: %v, %v; stream status %s", seen, err, status)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if code, out := put(t, url+"/v1/agent/service/deregister/api-1", ""); code != http.StatusOK {
		t.Fatalf("deregister: %d %s", code, out)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		seen, err := spread(conn, 20)
		if err == nil && seen["api-2"] == 20 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("traffic did not move to api-2 alone: %v, %v", seen, err)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The client's stream shows in proxy-status under its service ID,
	// its listener acknowledged.
	code, body := get(t, url+"/v1/agent/proxy-status/web-1")
	if code != http.StatusOK || !strings.Contains(body, "envoy.config.listener.v3.Listener") || !strings.Contains(body, "LastAckedVersion") {
		t.Errorf("proxy-status: %d %s", code, body)
	}

	// A service nobody registered: no listener in the response, which
	// gRPC takes as a resource that does not exist (in a state-of-the-world
	// response, one that is not there), never a configuration to reject.
	other, err := grpc.NewClient("xds:///nosuch", grpc.WithResolvers(res), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = call(ctx, other)
	if status.Code(err) != codes.Unavailable {
		t.Errorf("RPC to an unknown service: %v, want UNAVAILABLE", err)
	}
	_, body = get(t, url+"/v1/agent/proxy-status/web-1")
	var sts []xdsserver.StreamStatus
	if err := json.Unmarshal([]byte(body), &sts); err != nil || len(sts) == 0 {
		t.Fatalf("proxy-status %s: %v", body, err)
	}
	for _, st := range sts {
		for _, ts := range st.Types {
			if ts.LastNackError != "" {
				t.Errorf("the client rejected %s: %s", ts.TypeURL, ts.LastNackError)
			}
		}
	}

	// Deregistering the client's own service ends its streams; it is
	// refused until the service is back.
	if code, out := put(t, url+"/v1/agent/service/deregister/web-1", ""); code != http.StatusOK {
		t.Fatalf("deregister web-1: %d %s", code, out)
	}
	waitFor(t, "the client's streams to end", func() bool {
		_, body := get(t, url+"/v1/agent/proxy-status/web-1")
		return body == "[]"
	})
}

// grpc-go's xds.NewGRPCServer takes its inbound listener from the agent
// and enforces the intentions with its RBAC filter: with the default
// policy allow a call gets through, with deny it is refused (a plaintext
// caller has no identity any intention could allow).
func TestProxylessGRPCServer(t *testing.T) {
	cases := []struct {
		policy string
		want   codes.Code
	}{
		{"allow", codes.OK},
		{"deny", codes.PermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.policy, func(t *testing.T) {
			a, url, _ := devAgent(t, fmt.Sprintf(`{"acl": {"default_policy": %q}}`, tc.policy))
			waitLeader(t, url)
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := ln.Addr().(*net.TCPAddr).Port
			body := fmt.Sprintf(`{"ID":"api-1","Name":"api","Address":"127.0.0.1","Port":%d,"Connect":{"Native":true}}`, port)
			if code, out := put(t, url+"/v1/agent/service/register", body); code != http.StatusOK {
				t.Fatalf("register: %d %s", code, out)
			}
			bs := grpcBootstrap(a.rc.GRPCListenAddrs()[0], "api-1", "api", t.TempDir())
			bs = append(bs[:len(bs)-2], []byte(`, "server_listener_resource_name_template": "`+gen.GRPCServerListenerPrefix+`%s"}`)...)
			serving := make(chan error, 8)
			srv, err := xds.NewGRPCServer(
				grpc.Creds(insecure.NewCredentials()),
				xds.BootstrapContentsForTesting(bs),
				xds.ServingModeCallback(func(_ net.Addr, args xds.ServingModeChangeArgs) {
					if args.Mode == connectivity.ServingModeServing {
						serving <- nil
					} else {
						serving <- fmt.Errorf("not serving: %w", args.Err)
					}
				}),
				grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
					if err := ss.RecvMsg(&emptypb.Empty{}); err != nil {
						return err
					}
					return ss.SendMsg(&emptypb.Empty{})
				}),
			)
			if err != nil {
				t.Fatal(err)
			}
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = srv.Serve(ln)
			}()
			defer func() {
				srv.Stop()
				wg.Wait()
			}()
			select {
			case err := <-serving:
				if err != nil {
					_, status := get(t, url+"/v1/agent/proxy-status/api-1")
					t.Fatalf("%v; stream status %s", err, status)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the xDS server never started serving")
			}
			conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = conn.Close() }()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err = conn.Invoke(ctx, "/trellis.test.Echo/Hello", &emptypb.Empty{}, &emptypb.Empty{})
			if status.Code(err) != tc.want {
				t.Fatalf("RPC: %v, want %v", err, tc.want)
			}
		})
	}
}

// grpc-go balances a service-splitter's weighted clusters over two
// subsets: 80/20 over 1,000 RPCs, within 5 points.
func TestProxylessGRPCSplitter(t *testing.T) {
	a, url, _ := devAgent(t)
	waitLeader(t, url)
	for i, b := range []*grpcBackend{startGRPCBackend(t, "api-1"), startGRPCBackend(t, "api-2")} {
		body := fmt.Sprintf(`{"ID":%q,"Name":"api","Address":"127.0.0.1","Port":%d,"Meta":{"version":"v%d"},"Connect":{"Native":true}}`, b.name, b.port, i+1)
		if code, out := put(t, url+"/v1/agent/service/register", body); code != http.StatusOK {
			t.Fatalf("register %s: %d %s", b.name, code, out)
		}
	}
	for _, entry := range []string{
		`{"Kind":"service-defaults","Name":"api","Protocol":"grpc"}`,
		`{"Kind":"service-resolver","Name":"api","DefaultSubset":"v1","Subsets":{"v1":{"Filter":"Service.Meta.version == v1"},"v2":{"Filter":"Service.Meta.version == v2"}}}`,
		`{"Kind":"service-splitter","Name":"api","Splits":[{"Weight":80,"ServiceSubset":"v1"},{"Weight":20,"ServiceSubset":"v2"}]}`,
	} {
		if code, out := put(t, url+"/v1/config", entry); code != http.StatusOK {
			t.Fatalf("config %s: %d %s", entry, code, out)
		}
	}
	_, conn := proxylessClient(t, a, url)
	waitFor(t, "both subsets answering", func() bool {
		seen, err := spread(conn, 50)
		return err == nil && seen["api-1"] > 0 && seen["api-2"] > 0
	})
	seen, err := spread(conn, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if v2 := seen["api-2"]; v2 < 150 || v2 > 250 || seen["api-1"]+v2 != 1000 {
		t.Errorf("split over 1000 RPCs: %v, want 800/200 within 50", seen)
	}
}
