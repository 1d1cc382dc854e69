package structs

import (
	"encoding/json"
	"fmt"
	"strconv"
	"time"
)

// Duration is a time.Duration that encodes to JSON as a Go duration string
// ("10s") and decodes from either such a string or a number of nanoseconds,
// which is what Consul's clients send for check and session fields.
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON accepts "15s", "0.5s", "" (zero) or a number of nanoseconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		if s == "" {
			*d = 0
			return nil
		}
		v, err := time.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("invalid duration %q: %w", s, err)
		}
		*d = Duration(v)
		return nil
	}
	if string(b) == "null" {
		return nil
	}
	n, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("invalid duration %s: %w", b, err)
	}
	*d = Duration(int64(n))
	return nil
}

// Duration converts back to time.Duration.
func (d Duration) Duration() time.Duration { return time.Duration(d) }
