// Package config builds the agent's runtime configuration from Consul's
// agent flags and JSON and HCL config files, so that an operator's Consul setup and
// tools that start `consul agent` (Consul's sdk/testutil among them) work
// unchanged against Trellis.
//
// Load merges, in increasing precedence: Consul's defaults (with the few
// deliberate Trellis differences noted in defaults.go), the -dev overlay,
// each -config-file / -config-dir in command-line order, the flags, and the
// -hcl fragments. The merge follows Consul's rules: scalars replace, lists
// append, maps merge. HCL (v1, Consul's dialect) is normalised into the
// JSON document it stands for and decoded by the JSON path (hcl.go).
//
// Service and check definitions (service, services, check, checks) are
// kept as JSON documents in RuntimeConfig.Services and .Checks, for the
// agent to decode and register as its HTTP API does.
//
// Every key Consul accepts is accounted for in schema.go. Keys Trellis
// honours land in RuntimeConfig; Consul keys it does not implement are
// accepted and named together in one warning line returned by Load; keys
// that are not Consul keys at all are rejected, as Consul rejects them.
//
// The tls block and its deprecated top-level forms are resolved per
// protocol into RuntimeConfig.TLS (tls.go); the files they name are read
// and checked by tlsutil when the agent starts; auto_encrypt is checked
// against Consul's rules in auto_encrypt.go.
//
// Keys that ask for protection Trellis does not provide yet (auto_config,
// address and endpoint restrictions) are not warnings: when
// their value asks for the protection, Load fails with
// ErrProtectionNotProvided naming the key, so that no agent runs open while
// its operator believes it protected. Values that only relax (false, "")
// are accepted. A bare https or grpc_tls port is not refused: without a
// certificate nothing is served there (a warning says so), so nothing is
// left open.
//
// Gossip encryption is served: encrypt (checked to be base64 of 16, 24 or
// 32 bytes), encrypt_verify_incoming/outgoing, disable_keyring_file and
// the -encrypt and -disable-keyring-file flags; a keyring file left in the
// data dir by an earlier start wins over encrypt, with Consul's warning.
package config
