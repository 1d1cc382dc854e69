package structs

import (
	"bytes"
	"encoding/json"
	"strings"
)

// DecodeAgentDefinition decodes a service or check definition (a
// ServiceDefinition or CheckDefinition) the way Consul's agent reads one,
// from its HTTP API or from a config file: keys in CamelCase or Consul's
// snake_case, in any case. An *json.UnmarshalTypeError names the field.
func DecodeAgentDefinition(body []byte, out any) error {
	return json.NewDecoder(bytes.NewReader(snakeToCamel(body))).Decode(out)
}

// opaqueKeys name the objects whose keys are the user's own data (service
// meta, proxy config, HTTP headers, tagged-address names): their keys are
// kept exactly as sent, everything else is matched leniently.
var opaqueKeys = map[string]bool{
	"meta": true, "nodemeta": true, "servicemeta": true, "config": true, "header": true,
	"taggedaddresses": true, "servicetaggedaddresses": true,
}

// snakeToCamel rewrites the keys of a JSON document so that Consul's
// snake_case spellings ("enable_tag_override", "sidecar_service") reach the
// CamelCase struct fields: encoding/json already matches case-insensitively,
// so removing the underscores is enough. Keys inside opaque objects are left
// alone. Input that is not a JSON object is returned unchanged, for the
// decoder to report.
func snakeToCamel(body []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return body
	}
	if _, ok := v.(map[string]any); !ok {
		return body
	}
	out, err := json.Marshal(rewriteKeys(v))
	if err != nil {
		return body
	}
	return out
}

func rewriteKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, val := range t {
			nk := strings.ReplaceAll(k, "_", "")
			if opaqueKeys[strings.ToLower(nk)] {
				out[nk] = val
				continue
			}
			// A CamelCase key wins over its snake_case twin, as in Consul.
			if _, exists := out[nk]; exists && nk != k {
				continue
			}
			out[nk] = rewriteKeys(val)
		}
		return out
	case []any:
		for i := range t {
			t[i] = rewriteKeys(t[i])
		}
		return t
	}
	return v
}
