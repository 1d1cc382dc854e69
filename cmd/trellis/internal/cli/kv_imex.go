package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
)

// kvExportEntry is one pair in Consul's kv export format; the value is
// base64 so that binary values survive the JSON.
type kvExportEntry struct {
	Key   string `json:"key"`
	Flags uint64 `json:"flags"`
	Value string `json:"value"`
}

const kvExportHelp = `
Usage: trellis kv export [options] [PREFIX]

  Retrieves the key-value pairs under the prefix (all of them without one)
  and writes them to standard output as JSON that "trellis kv import" (or
  "consul kv import") reads back.`

func runKVExport(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("kv export", kvExportHelp, env.Stderr)
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	prefix := ""
	switch rest := fs.Args(); len(rest) {
	case 0:
	case 1:
		prefix = rest[0]
	default:
		fmt.Fprintf(env.Stderr, "Too many arguments (expected 1, got %d)\n", len(rest))
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	var pairs []kvPair
	if err := c.getJSON(context.Background(), kvPath(strings.TrimPrefix(prefix, "/")), url.Values{"recurse": {""}}, true, &pairs); err != nil && !isNotFound(err) {
		fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
		return 1
	}
	exported := make([]kvExportEntry, len(pairs))
	for i, p := range pairs {
		exported[i] = kvExportEntry{Key: p.Key, Flags: p.Flags, Value: base64.StdEncoding.EncodeToString(p.Value)}
	}
	out, err := json.MarshalIndent(exported, "", "\t")
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error exporting KV data: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, string(out))
	return 0
}

const kvImportHelp = `
Usage: trellis kv import [options] [DATA]

  Writes the key-value pairs of DATA, in the JSON format "kv export"
  produces, to the key-value store. DATA may be "@path" to read a file or
  "-" to read standard input. -prefix puts every key under that prefix.`

func runKVImport(args []string, env *Env) int {
	var hf httpFlags
	var prefix string
	fs := newFlagSet("kv import", kvImportHelp, env.Stderr)
	fs.StringVar(&prefix, "prefix", "", "Key prefix for imported data. The default is empty meaning root.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var data string
	switch rest := fs.Args(); len(rest) {
	case 0:
		fmt.Fprintln(env.Stderr, "Error! Missing DATA argument")
		return 1
	case 1:
		// kvDataFromArgs reads @file and - as kv put does.
		_, d, err := kvDataFromArgs([]string{"", rest[0]}, env.Stdin)
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! %s\n", err)
			return 1
		}
		data = d
	default:
		fmt.Fprintf(env.Stderr, "Too many arguments (expected 1, got %d)\n", len(rest))
		return 1
	}
	var entries []kvExportEntry
	if err := json.Unmarshal([]byte(data), &entries); err != nil {
		fmt.Fprintf(env.Stderr, "Cannot unmarshal data: %s\n", err)
		return 1
	}
	// Decode everything first so that bad input writes nothing.
	values := make([][]byte, len(entries))
	for i, e := range entries {
		v, err := base64.StdEncoding.DecodeString(e.Value)
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error base 64 decoding value for key %s: %s\n", e.Key, err)
			return 1
		}
		values[i] = v
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	for i, e := range entries {
		key := e.Key
		if prefix != "" {
			key = path.Join(prefix, e.Key)
		}
		q := url.Values{}
		if e.Flags != 0 {
			q.Set("flags", strconv.FormatUint(e.Flags, 10))
		}
		if _, _, err := c.do(context.Background(), request{
			method: http.MethodPut, path: kvPath(key), query: q, withDC: true,
			body: bytes.NewReader(values[i]), contentType: "application/octet-stream",
		}); err != nil {
			fmt.Fprintf(env.Stderr, "Error! Failed writing data for key %s: %s\n", key, err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Imported: %s\n", key)
	}
	return 0
}
