package config

import "errors"

// Sentinel errors; every error Load returns wraps one of them, so callers
// can tell a usage mistake from a bad file with errors.Is.
var (
	// ErrHelp is returned when -h or -help was given; the usage has been
	// written to LoadOptions.FlagOutput and the caller should exit 0.
	ErrHelp = errors.New("help requested")
	// ErrInvalidFlag: the command line could not be parsed.
	ErrInvalidFlag = errors.New("invalid flag")
	// ErrConfigFile: a config file or directory could not be read or is not
	// valid JSON of the right shape.
	ErrConfigFile = errors.New("invalid config file")
	// ErrInvalidConfigKey: a config file holds a key that is not a Consul
	// key at all (Consul rejects these too).
	ErrInvalidConfigKey = errors.New("invalid config key")
	// ErrInvalidConfig: the merged configuration is not valid.
	ErrInvalidConfig = errors.New("invalid configuration")
	// ErrProtectionNotProvided: the configuration asks for protection
	// (ACLs, TLS, gossip encryption, address restrictions) that Trellis
	// does not provide yet. The agent refuses to start rather than serve
	// in the open while its operator believes otherwise.
	ErrProtectionNotProvided = errors.New("protection not provided")
	// ErrNodeID: the node ID could not be read, validated or persisted.
	ErrNodeID = errors.New("node ID")
)
