package structs

// The internal RPC methods of the Connect CA (see endpoints.go for the
// conventions). Roots and ConfigurationGet are reads; ConfigurationSet and
// Sign run on the leader, which holds the signing state (serial numbers,
// rate limit).
var (
	// MethodConnectCARoots lists the trusted roots (blocking).
	MethodConnectCARoots = readMethod[DCSpecificRequest, IndexedCARoots]("ConnectCA.Roots")
	// MethodConnectCAConfigurationGet reads the CA configuration.
	MethodConnectCAConfigurationGet = readMethod[DCSpecificRequest, CAConfiguration]("ConnectCA.ConfigurationGet")
	// MethodConnectCAConfigurationSet changes the CA configuration,
	// rotating the root when the key changes.
	MethodConnectCAConfigurationSet = writeMethod[CARequest, struct{}]("ConnectCA.ConfigurationSet") // (Config only)
	// MethodConnectCASign signs a service's CSR; rate-limited, failing
	// with ErrRateLimited under load.
	MethodConnectCASign = writeMethod[CASignRequest, IssuedCert]("ConnectCA.Sign")
)
