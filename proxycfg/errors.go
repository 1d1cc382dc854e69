package proxycfg

import "errors"

// Sentinel errors of the package; match them with errors.Is.
var (
	// ErrMissingDataSource is returned by New when a DataSources member is
	// nil.
	ErrMissingDataSource = errors.New("proxycfg: missing data source")
	// ErrInvalidConfig is returned by New for a Config missing a required
	// field.
	ErrInvalidConfig = errors.New("proxycfg: invalid manager config")
	// ErrClosed is returned by Register after Close.
	ErrClosed = errors.New("proxycfg: manager closed")
	// ErrUnsupportedKind is returned by Register for a service that is not
	// a connect-proxy or one of the three gateway kinds.
	ErrUnsupportedKind = errors.New("proxycfg: unsupported service kind")
	// ErrInvalidProxy is returned by Register for a definition the state
	// machine cannot work with (a sidecar without a destination service,
	// a service without a name, an ID that does not match the service).
	ErrInvalidProxy = errors.New("proxycfg: invalid proxy registration")
)
