package structs

// The internal RPC methods of the Connect CA (see endpoints.go for the
// conventions). Roots and ConfigurationGet are reads; ConfigurationSet and
// Sign run on the leader, which holds the signing state (serial numbers,
// rate limit).
const (
	// MethodConnectCARoots lists the trusted roots (blocking).
	MethodConnectCARoots = "ConnectCA.Roots" // *DCSpecificRequest -> *IndexedCARoots
	// MethodConnectCAConfigurationGet reads the CA configuration.
	MethodConnectCAConfigurationGet = "ConnectCA.ConfigurationGet" // *DCSpecificRequest -> *CAConfiguration
	// MethodConnectCAConfigurationSet changes the CA configuration,
	// rotating the root when the key changes.
	MethodConnectCAConfigurationSet = "ConnectCA.ConfigurationSet" // *CARequest (Config only) -> *struct{}
	// MethodConnectCASign signs a service's CSR; rate-limited, failing
	// with ErrRateLimited under load.
	MethodConnectCASign = "ConnectCA.Sign" // *CASignRequest -> *IssuedCert
)
