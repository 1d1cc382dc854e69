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
//
// The ACL scenarios (issue 16; acl_*_test.go) run 3 servers and a client
// agent with default deny. TestACLEndpointMatrix sends every endpoint
// family to the client agent (and a few to a follower) as seven callers:
// no token, the anonymous secret, read-only, write under app prefixes,
// management, a deleted token and an expired one, checking the status,
// Consul's 403 text, each list's exact contents and
// X-Consul-Results-Filtered-By-ACLs, and that a refused write changed
// nothing. Consul's shortest token TTL is a minute, so the expiring token
// is made first and its column runs last, after the blocking-query, Go
// client, agent-token and CLI subtests that share the cluster.
// TestACLPersistence bootstraps with the CLI, kills the leader, restarts
// every server and follows Consul's bootstrap reset procedure:
//
//	go test ./integration/ -run 'TestACL(EndpointMatrix|Persistence)$' -v
//
// The Jepsen-style linearizability check (issue 12, item 5; jepsen_*.go)
// runs 10 clients reading, writing and CASing 5 keys on 3 servers while a
// nemesis kills or pauses (SIGSTOP) the leader or a random server, and
// checks the history with porcupine plus direct checks (a write applied
// twice, a write answered "No cluster leader" that was applied, stale
// reads, servers that disagree after a full kill -9 and restart). The
// short run picks one nemesis by the clock; TRELLIS_JEPSEN_NEMESIS,
// TRELLIS_JEPSEN_READS and TRELLIS_JEPSEN_DURATION choose, and
// TRELLIS_JEPSEN_OUT keeps the history and the visualization:
//
//	TRELLIS_JEPSEN_NEMESIS=kill-leader go test ./integration/ -run TestJepsenLinearizable -v
//	make jepsen JEPSEN_DURATION=3m   # every nemesis, default and ?consistent reads
package integration
