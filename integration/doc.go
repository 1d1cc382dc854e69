// Package integration holds Trellis's end-to-end scenarios: real trellis
// processes (3-server clusters, client agents, -dev agents) started by the
// harness package on free 127.0.0.1 ports and driven through Consul's HTTP
// API, both with raw requests (to see exact status codes and headers) and
// with the official github.com/hashicorp/consul/api client.
//
// The package has only tests. TestMain builds ./cmd/trellis once per
// `go test` run; set TRELLIS_BINARY to use a prebuilt binary instead, and
// TRELLIS_BUILD_RACE=1 to build it with -race. `go test -short` skips every
// scenario.
//
//	go test ./integration/ -run TestClusterReplication -v
//	go test ./integration/ -run 'TestConsulAPI(Dev|Cluster)' -v
//
// The client-agent scenarios (issue 3) run 3 servers with
// raft_multiplier 1 and client agents with a 1 s retry_interval:
//
//	go test ./integration/ -run 'TestClient|TestAntiEntropy|TestConsulAPIAgent|TestAgentBadInput|TestCLIAgentCommands' -v
//
// The xDS and proxycfg scenarios (issues 5 and 6) run the same cluster
// with web and api sidecars on the client agent and drive Envoy-like ADS
// clients (delta and state-of-the-world, xdsclient_test.go) against the
// client agent and a server, validating every resource with gen.Validate:
//
//	go test ./integration/ -run 'TestXDS|TestProxycfg' -v
package integration
