// Package harness runs Trellis as real processes for end-to-end tests: it
// builds the trellis binary, hands out free loopback ports, starts servers,
// client agents and -dev agents with Consul's flags, waits for a Raft leader,
// and can kill -9, stop (SIGINT), pause (SIGSTOP, Pause and Resume) and
// restart each process from its data dir.
//
// The package holds no package-level mutable state. A test owns everything it
// uses: the binary path (built once in the test package's TestMain with
// BuildBinary), a PortAllocator, and the Cluster or Agent values it starts.
// Every process is killed in t.Cleanup, and when the test failed the tail of
// each process log is printed, so a red CI run shows what the servers said.
//
// Probes speak plaintext HTTP unless an agent has an HTTPSConfig
// (AgentConfig.HTTPS, ClusterConfig.ServerHTTPS and ClientHTTPS): such an
// agent serves its API over HTTPS only, and WaitForLeader, WaitForClients,
// Agent.GetJSON and Agent.HTTPClient reach it with the configured CA and
// client certificate; Agent.HTTPURL carries the scheme.
//
// A typical scenario:
//
//	ports, _ := harness.NewPortAllocator(harness.PortAllocatorConfig{})
//	c := harness.StartCluster(t, harness.ClusterConfig{
//		Binary: binary, Ports: ports, Servers: 3,
//	})
//	leader, err := c.WaitForLeader(ctx)
//	...
//	leader.Kill()            // kill -9
//	c.WaitForLeader(ctx)     // a new leader among the survivors
//	leader.Restart()         // same flags, ports and data dir
package harness
