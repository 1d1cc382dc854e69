package config

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/hashicorp/hcl"
)

// HCL config is read with HCL v1 (github.com/hashicorp/hcl v1.0.0, the
// version Consul's agent pins), so that a file Consul reads parses the same
// here. The decoded document is normalised into the shape encoding/json
// gives the same config in JSON and then goes through the JSON path: every
// key is declared once, by source's JSON names and schema.go.

// listKeys are the keys whose value is a list of objects. HCL v1 decodes
// every block and every object as a list of maps, because a block may be
// repeated; for these keys each element is kept, for every other key a
// single block becomes an object. They are matched on the last segment of
// the key's path, as they may appear in a service, its sidecar or a proxy.
func listKeys() map[string]bool {
	return map[string]bool{
		"services": true, "checks": true, "upstreams": true, "paths": true,
		"watches": true, "segments": true, "bootstrap": true,
		"managed_service_provider": true,
	}
}

// topListKeys are top-level keys that take one object in JSON but that
// HCL files repeat as blocks: `service { }` twice defines two services.
func topListKeys() map[string]bool {
	return map[string]bool{"service": true, "check": true}
}

// parseHCL decodes an HCL document into the JSON document it stands for.
func parseHCL(data []byte) (map[string]any, []byte, error) {
	var raw map[string]any
	if err := hcl.Decode(&raw, string(data)); err != nil {
		return nil, nil, fmt.Errorf("invalid HCL: %w", err)
	}
	n := hclNormaliser{lists: listKeys(), top: topListKeys()}
	obj, err := n.object(raw, "")
	if err != nil {
		return nil, nil, err
	}
	out, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("invalid HCL: %w", err)
	}
	return obj, out, nil
}

type hclNormaliser struct {
	lists, top map[string]bool
}

func (n hclNormaliser) object(m map[string]any, prefix string) (map[string]any, error) {
	out := make(map[string]any, len(m))
	for k, v := range m {
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		nv, err := n.value(v, path, strings.ToLower(k), prefix == "")
		if err != nil {
			return nil, err
		}
		out[k] = nv
	}
	return out, nil
}

// value normalises the value of key (its lower-case name; path is dotted).
func (n hclNormaliser) value(v any, path, key string, top bool) (any, error) {
	switch x := v.(type) {
	case []map[string]any:
		if n.lists[key] || top && n.top[key] {
			list := make([]any, 0, len(x))
			for _, e := range x {
				o, err := n.object(e, path)
				if err != nil {
					return nil, err
				}
				list = append(list, o)
			}
			return list, nil
		}
		if len(x) != 1 {
			return nil, fmt.Errorf("%s: expected one block, got %d: merge them into one", strings.ToLower(path), len(x))
		}
		return n.object(x[0], path)
	case []any:
		list := make([]any, 0, len(x))
		for _, e := range x {
			switch ex := e.(type) {
			case []map[string]any:
				// An object inside a list, which HCL also wraps.
				for _, o := range ex {
					no, err := n.object(o, path)
					if err != nil {
						return nil, err
					}
					list = append(list, no)
				}
			case map[string]any:
				no, err := n.object(ex, path)
				if err != nil {
					return nil, err
				}
				list = append(list, no)
			default:
				list = append(list, e)
			}
		}
		return list, nil
	case map[string]any:
		return n.object(x, path)
	}
	return v, nil
}
