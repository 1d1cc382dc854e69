package ca

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Defaults of the built-in provider's configuration, as Consul's
// (agent/connect/ca/provider_consul_config.go and structs.CommonCAProviderConfig).
const (
	DefaultLeafCertTTL         = 72 * time.Hour
	DefaultIntermediateCertTTL = 8760 * time.Hour
	DefaultRootCertTTL         = 87600 * time.Hour
	DefaultPrivateKeyType      = "ec"
	DefaultPrivateKeyBits      = 256
	// DefaultCSRMaxPerSecond is Consul's default CSR rate limit per server:
	// low enough to keep a server responsive during a rotation, high
	// enough for 1,000 services to re-issue in about 20 s.
	DefaultCSRMaxPerSecond = 50.0
)

// Limits Consul puts on the leaf TTL.
const (
	MinLeafCertTTL = time.Hour
	MaxLeafCertTTL = 365 * 24 * time.Hour
	// intermediateCertRenewInterval is Consul's intermediate renewal
	// check, which bounds the smallest intermediate TTL (3x it).
	intermediateCertRenewInterval = time.Hour
)

// ErrInvalidConfig is matched (errors.Is) by every configuration error.
// The errors' texts are Consul's messages alone, without this prefix.
var ErrInvalidConfig = errors.New("invalid CA configuration")

// configError carries Consul's message and unwraps to ErrInvalidConfig.
type configError struct{ msg string }

func (e *configError) Error() string { return e.msg }
func (e *configError) Unwrap() error { return ErrInvalidConfig }

func configErrorf(format string, args ...any) error {
	return &configError{msg: fmt.Sprintf(format, args...)}
}

// Config is the parsed configuration of the built-in CA (the Config map of
// structs.CAConfiguration).
type Config struct {
	LeafCertTTL         time.Duration
	IntermediateCertTTL time.Duration
	RootCertTTL         time.Duration
	// PrivateKeyType ("ec" or "rsa") and PrivateKeyBits choose the key the
	// CA generates for a new root (ignored when PrivateKey is given).
	PrivateKeyType string
	PrivateKeyBits int
	// PrivateKey and RootCert, when set, are an operator-supplied CA key
	// (and optionally its certificate) instead of a generated one.
	PrivateKey string
	RootCert   string
	// SkipValidate disables the TTL and key checks (Consul's test escape
	// hatch; Trellis' tests use it for short leaf TTLs).
	SkipValidate bool
	// CSRMaxPerSecond, when CSRMaxPerSecondSet, overrides the server's
	// signing rate limit; 0 disables the limit.
	CSRMaxPerSecond    float64
	CSRMaxPerSecondSet bool
	// CSRMaxConcurrent, when above 0, bounds the signings the leader runs
	// at once; the rate limit (CSRMaxPerSecond) is then ignored, as in
	// Consul.
	CSRMaxConcurrent int
}

// DefaultConfigMap is the configuration a new cluster starts with, in the
// form GET /v1/connect/ca/configuration shows it.
func DefaultConfigMap() map[string]interface{} {
	return map[string]interface{}{
		// Written as Consul writes them ("72h", not "72h0m0s").
		"LeafCertTTL":         "72h",
		"IntermediateCertTTL": "8760h",
		"RootCertTTL":         "87600h",
		"PrivateKeyType":      DefaultPrivateKeyType,
		"PrivateKeyBits":      DefaultPrivateKeyBits,
	}
}

// testStateKey is the built-in provider's pass-through of provider state:
// Consul's consul provider reports a "test_state" map of its configuration
// as its State, so that tools can check that State survives a
// configuration round trip.
const testStateKey = "test_state"

// ProviderState is the State the built-in provider reports for a
// configuration: its test_state map with every value a string, or nil.
func ProviderState(raw map[string]interface{}) map[string]string {
	for k, v := range raw {
		if normKey(k) != normKey(testStateKey) {
			continue
		}
		m, ok := v.(map[string]interface{})
		if !ok {
			return nil
		}
		out := make(map[string]string, len(m))
		for mk, mv := range m {
			str, ok := mv.(string)
			if !ok {
				return nil
			}
			out[mk] = str
		}
		return out
	}
	return nil
}

// normKey matches config keys as Consul's weakly typed decoder does
// (case-insensitively), also accepting snake_case.
func normKey(k string) string { return strings.ToLower(strings.ReplaceAll(k, "_", "")) }

// ParseConfig decodes and validates a CA configuration map, filling
// defaults. Values may be JSON-decoded (float64), msgpack-decoded (int64,
// uint64) or strings, as Consul's decoder accepts; unknown keys are ignored.
func ParseConfig(raw map[string]interface{}) (*Config, error) {
	c := &Config{
		LeafCertTTL:         DefaultLeafCertTTL,
		IntermediateCertTTL: DefaultIntermediateCertTTL,
		RootCertTTL:         DefaultRootCertTTL,
		PrivateKeyType:      DefaultPrivateKeyType,
		PrivateKeyBits:      DefaultPrivateKeyBits,
	}
	for k, v := range raw {
		var err error
		switch normKey(k) {
		case "leafcertttl":
			c.LeafCertTTL, err = toDuration(v)
		case "intermediatecertttl":
			c.IntermediateCertTTL, err = toDuration(v)
		case "rootcertttl":
			c.RootCertTTL, err = toDuration(v)
		case "privatekeytype":
			c.PrivateKeyType, err = toString(v)
		case "privatekeybits":
			c.PrivateKeyBits, err = toInt(v)
		case "privatekey":
			c.PrivateKey, err = toString(v)
		case "rootcert":
			c.RootCert, err = toString(v)
		case "skipvalidate":
			c.SkipValidate, err = toBool(v)
		case "csrmaxpersecond":
			c.CSRMaxPerSecond, err = toFloat(v)
			c.CSRMaxPerSecondSet = true
		case "csrmaxconcurrent":
			c.CSRMaxConcurrent, err = toInt(v)
		default:
			continue
		}
		if err != nil {
			return nil, configErrorf("error decoding config: '%s' %v", k, err)
		}
	}
	if c.PrivateKey == "" && c.RootCert != "" {
		return nil, configErrorf("must provide a private key when providing a root cert")
	}
	if c.RootCertTTL <= 0 {
		c.RootCertTTL = DefaultRootCertTTL
	}
	if err := c.validate(); err != nil {
		return nil, configErrorf("%s", err.Error())
	}
	return c, nil
}

// validate applies Consul's CommonCAProviderConfig.Validate, with its
// messages.
func (c *Config) validate() error {
	if c.SkipValidate {
		return nil
	}
	if c.LeafCertTTL < MinLeafCertTTL {
		return fmt.Errorf("leaf cert TTL must be greater or equal than %s", MinLeafCertTTL)
	}
	if c.LeafCertTTL > MaxLeafCertTTL {
		return fmt.Errorf("leaf cert TTL must be less than %s", MaxLeafCertTTL)
	}
	if c.IntermediateCertTTL < 3*intermediateCertRenewInterval {
		return fmt.Errorf("Intermediate Cert TTL must be greater or equal than %dh", 3*int(intermediateCertRenewInterval.Hours()))
	}
	if c.IntermediateCertTTL < 3*c.LeafCertTTL {
		return fmt.Errorf("Intermediate Cert TTL must be greater or equal than 3 * LeafCertTTL (>=%s).", 3*c.LeafCertTTL)
	}
	return validateKeyType(c.PrivateKeyType, c.PrivateKeyBits)
}

// validateKeyType checks a key type and size with Consul's messages.
func validateKeyType(typ string, bits int) error {
	switch typ {
	case "ec":
		if bits != 224 && bits != 256 && bits != 384 && bits != 521 {
			return errors.New("EC key length must be one of (224, 256, 384, 521) bits")
		}
	case "rsa":
		if bits != 2048 && bits != 4096 {
			return errors.New("RSA key length must be 2048 or 4096 bits")
		}
	default:
		return errors.New("private key type must be either 'ec' or 'rsa'")
	}
	return nil
}

// SameKey reports whether two configurations name the same CA key, so
// that switching from one to the other keeps the active root. As in
// Consul, the built-in provider's identity is its supplied key and root
// and the type and size of the key it generates; any other change (a TTL,
// the rate limit) only updates the configuration.
func SameKey(a, b *Config) bool {
	return a.PrivateKey == b.PrivateKey && a.RootCert == b.RootCert &&
		a.PrivateKeyType == b.PrivateKeyType && a.PrivateKeyBits == b.PrivateKeyBits
}

func toString(v interface{}) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case []byte:
		return string(t), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("expected a string, got %T", v)
}

func toFloat(v interface{}) (float64, error) {
	switch t := v.(type) {
	case float64:
		return t, nil
	case float32:
		return float64(t), nil
	case int:
		return float64(t), nil
	case int64:
		return float64(t), nil
	case uint64:
		return float64(t), nil
	case int32:
		return float64(t), nil
	case uint32:
		return float64(t), nil
	case string:
		if t == "" {
			return 0, nil
		}
		return strconv.ParseFloat(t, 64)
	case []byte:
		return toFloat(string(t))
	case bool:
		if t {
			return 1, nil
		}
		return 0, nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("expected a number, got %T", v)
}

func toInt(v interface{}) (int, error) {
	f, err := toFloat(v)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || math.Abs(f) > math.MaxInt32 {
		return 0, fmt.Errorf("expected an integer, got %v", v)
	}
	return int(f), nil
}

func toBool(v interface{}) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if t == "" {
			return false, nil
		}
		return strconv.ParseBool(t)
	case nil:
		return false, nil
	}
	f, err := toFloat(v)
	return f != 0, err
}

// toDuration accepts a Go duration string or a number of nanoseconds.
func toDuration(v interface{}) (time.Duration, error) {
	switch t := v.(type) {
	case string:
		if t == "" {
			return 0, nil
		}
		return time.ParseDuration(t)
	case []byte:
		return toDuration(string(t))
	}
	f, err := toFloat(v)
	if err != nil {
		return 0, fmt.Errorf("expected a duration, got %T", v)
	}
	return time.Duration(f), nil
}
