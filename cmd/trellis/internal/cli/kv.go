package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
)

// kvPair is a KV entry as /v1/kv returns it (Value is base64 in JSON,
// which encoding/json decodes into []byte).
type kvPair struct {
	Key         string
	CreateIndex uint64
	ModifyIndex uint64
	LockIndex   uint64
	Flags       uint64
	Value       []byte
	Session     string
}

func kvPath(key string) string { return "/v1/kv/" + key }

const kvGetHelp = `
Usage: trellis kv get [options] [KEY_OR_PREFIX]

  Retrieves the value from the key-value store at the given key name. With
  -recurse, lists every key-value pair under the prefix as key:value lines;
  with -keys, lists only the key names. -detailed shows all metadata.`

func runKVGet(args []string, env *Env) int {
	var hf httpFlags
	var detailed, keys, recurse, b64 bool
	var separator string
	fs := newFlagSet("kv get", kvGetHelp, env.Stderr)
	fs.BoolVar(&b64, "base64", false, "Base64 encode the value.")
	fs.BoolVar(&detailed, "detailed", false, "Provide additional metadata about the key (ModifyIndex, Flags, ...).")
	fs.BoolVar(&keys, "keys", false, "List keys which start with the given prefix, but not their values.")
	fs.BoolVar(&recurse, "recurse", false, "Recursively look at all keys prefixed with the given path.")
	fs.StringVar(&separator, "separator", "/", "Separator between keys; only used with -keys.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	key := ""
	switch rest := fs.Args(); len(rest) {
	case 0:
	case 1:
		key = rest[0]
	default:
		fmt.Fprintf(env.Stderr, "Too many arguments (expected 1, got %d)\n", len(rest))
		return 1
	}
	// Keys never start with "/"; people type it anyway.
	key = strings.TrimPrefix(key, "/")
	if key == "" && !recurse && !keys {
		fmt.Fprintln(env.Stderr, "Error! Missing KEY argument")
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	ctx := context.Background()

	switch {
	case keys:
		q := url.Values{"keys": {""}}
		if separator != "" {
			q.Set("separator", separator)
		}
		var list []string
		if err := c.getJSON(ctx, kvPath(key), q, true, &list); err != nil && !isNotFound(err) {
			fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
			return 1
		}
		for _, k := range list {
			fmt.Fprintln(env.Stdout, k)
		}
		return 0
	case recurse:
		var pairs []kvPair
		if err := c.getJSON(ctx, kvPath(key), url.Values{"recurse": {""}}, true, &pairs); err != nil && !isNotFound(err) {
			fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
			return 1
		}
		for i, p := range pairs {
			if detailed {
				fmt.Fprintln(env.Stdout, prettyKVPair(p, b64))
				if i < len(pairs)-1 {
					fmt.Fprintln(env.Stdout)
				}
				continue
			}
			fmt.Fprintf(env.Stdout, "%s:%s\n", p.Key, kvValue(p.Value, b64))
		}
		return 0
	default:
		var pairs []kvPair
		err := c.getJSON(ctx, kvPath(key), nil, true, &pairs)
		if isNotFound(err) || (err == nil && len(pairs) == 0) {
			fmt.Fprintf(env.Stderr, "Error! No key exists at: %s\n", key)
			return 1
		}
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error querying Consul agent: %s\n", err)
			return 1
		}
		if detailed {
			fmt.Fprintln(env.Stdout, prettyKVPair(pairs[0], b64))
			return 0
		}
		fmt.Fprintln(env.Stdout, kvValue(pairs[0].Value, b64))
		return 0
	}
}

func kvValue(v []byte, b64 bool) string {
	if b64 {
		return base64.StdEncoding.EncodeToString(v)
	}
	return string(v)
}

// prettyKVPair renders -detailed output as Consul does (tabwriter, minwidth
// 0, tabwidth 2, padding 6).
func prettyKVPair(p kvPair, b64 bool) string {
	var b bytes.Buffer
	tw := tabwriter.NewWriter(&b, 0, 2, 6, ' ', 0)
	fmt.Fprintf(tw, "CreateIndex\t%d\n", p.CreateIndex)
	fmt.Fprintf(tw, "Flags\t%d\n", p.Flags)
	fmt.Fprintf(tw, "Key\t%s\n", p.Key)
	fmt.Fprintf(tw, "LockIndex\t%d\n", p.LockIndex)
	fmt.Fprintf(tw, "ModifyIndex\t%d\n", p.ModifyIndex)
	session := p.Session
	if session == "" {
		session = "-"
	}
	fmt.Fprintf(tw, "Session\t%s\n", session)
	fmt.Fprintf(tw, "Value\t%s", kvValue(p.Value, b64))
	_ = tw.Flush()
	return b.String()
}

const kvPutHelp = `
Usage: trellis kv put [options] KEY [DATA]

  Writes the data to the given path in the key-value store. DATA may be
  "@path" to read a file, or "-" to read standard input; without DATA an
  empty value is written. -cas with -modify-index performs a check-and-set.`

func runKVPut(args []string, env *Env) int {
	var hf httpFlags
	var cas, b64, acquire, release bool
	var flags, modifyIndex uint64
	var session string
	fs := newFlagSet("kv put", kvPutHelp, env.Stderr)
	fs.BoolVar(&cas, "cas", false, "Perform a Check-And-Set operation; requires -modify-index.")
	fs.Uint64Var(&flags, "flags", 0, "Unsigned integer value to assign to this key-value pair.")
	fs.BoolVar(&b64, "base64", false, "Treat the data as base 64 encoded.")
	fs.Uint64Var(&modifyIndex, "modify-index", 0, "ModifyIndex of the key, used with -cas.")
	fs.StringVar(&session, "session", "", "Session to attach, required with -acquire and -release.")
	fs.BoolVar(&acquire, "acquire", false, "Obtain a lock on the key with -session.")
	fs.BoolVar(&release, "release", false, "Release the lock held on the key by -session.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	key, data, err := kvDataFromArgs(fs.Args(), env.Stdin)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error! %s\n", err)
		return 1
	}
	value := []byte(data)
	if b64 {
		if value, err = base64.StdEncoding.DecodeString(data); err != nil {
			fmt.Fprintf(env.Stderr, "Error! Cannot base 64 decode data: %s\n", err)
			return 1
		}
	}
	if (release || acquire) && session == "" {
		fmt.Fprintln(env.Stderr, "Error! Missing -session (required with -acquire and -release)")
		return 1
	}
	if cas && modifyIndex == 0 {
		fmt.Fprintln(env.Stderr, "Must specify -modify-index with -cas!")
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}

	// Same query the official client builds for Put/CAS/Acquire/Release.
	q := url.Values{}
	if flags != 0 {
		q.Set("flags", strconv.FormatUint(flags, 10))
	}
	switch {
	case cas:
		q.Set("cas", strconv.FormatUint(modifyIndex, 10))
	case acquire:
		q.Set("acquire", session)
	case release:
		q.Set("release", session)
	}
	body, _, err := c.do(context.Background(), request{
		method: http.MethodPut, path: kvPath(key), query: q, withDC: true,
		body: bytes.NewReader(value), contentType: "application/octet-stream",
	})
	ok = err == nil && strings.TrimSpace(string(body)) == "true"
	switch {
	case cas:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! Did not write to %s: %s\n", key, err)
			return 1
		}
		if !ok {
			fmt.Fprintf(env.Stderr, "Error! Did not write to %s: CAS failed\n", key)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Data written to: %s\n", key)
	case acquire:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! Failed writing data: %s\n", err)
			return 1
		}
		if !ok {
			fmt.Fprintln(env.Stderr, "Error! Did not acquire lock")
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Lock acquired on: %s\n", key)
	case release:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! Failed writing data: %s\n", err)
			return 1
		}
		if !ok {
			fmt.Fprintln(env.Stderr, "Error! Did not release lock")
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Lock released on: %s\n", key)
	default:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! Failed writing data: %s\n", err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Data written to: %s\n", key)
	}
	return 0
}

// kvDataFromArgs reads KEY [DATA] as Consul does: "@file" reads a file,
// "-" reads stdin, anything else is the value.
func kvDataFromArgs(args []string, stdin io.Reader) (key, data string, err error) {
	switch len(args) {
	case 0:
		return "", "", fmt.Errorf("Missing KEY argument")
	case 1:
		return args[0], "", nil
	case 2:
	default:
		return "", "", fmt.Errorf("Too many arguments (expected 1 or 2, got %d)", len(args))
	}
	key, data = args[0], args[1]
	switch {
	case data == "":
		return key, "", nil
	case data[0] == '@':
		b, err := os.ReadFile(data[1:])
		if err != nil {
			return "", "", fmt.Errorf("Failed to read file: %w", err)
		}
		return key, string(b), nil
	case data == "-":
		b, err := io.ReadAll(stdin)
		if err != nil {
			return "", "", fmt.Errorf("Failed to read stdin: %w", err)
		}
		return key, string(b), nil
	}
	return key, data, nil
}

const kvDeleteHelp = `
Usage: trellis kv delete [options] KEY_OR_PREFIX

  Removes the value from the key-value store at the given path. With
  -recurse, removes every key under the prefix. -cas with -modify-index
  deletes only if the key was not modified since.`

func runKVDelete(args []string, env *Env) int {
	var hf httpFlags
	var cas, recurse bool
	var modifyIndex uint64
	fs := newFlagSet("kv delete", kvDeleteHelp, env.Stderr)
	fs.BoolVar(&cas, "cas", false, "Perform a Check-And-Set operation; requires -modify-index.")
	fs.Uint64Var(&modifyIndex, "modify-index", 0, "ModifyIndex of the key, used with -cas.")
	fs.BoolVar(&recurse, "recurse", false, "Recursively delete all keys with the path.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	key := ""
	switch rest := fs.Args(); len(rest) {
	case 0:
	case 1:
		key = rest[0]
	default:
		fmt.Fprintf(env.Stderr, "Too many arguments (expected 1, got %d)\n", len(rest))
		return 1
	}
	key = strings.TrimPrefix(key, "/")
	switch {
	case key == "" && !recurse:
		fmt.Fprintln(env.Stderr, "Error! Missing KEY argument")
		return 1
	case cas && modifyIndex == 0:
		fmt.Fprintln(env.Stderr, "Cannot delete a key that does not exist. Provide a -modify-index greater than than 0.")
		return 1
	case modifyIndex != 0 && !cas:
		fmt.Fprintln(env.Stderr, "Cannot specify -modify-index without -cas!")
		return 1
	case recurse && cas:
		fmt.Fprintln(env.Stderr, "Cannot specify both -cas and -recurse!")
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	q := url.Values{}
	switch {
	case recurse:
		q.Set("recurse", "")
	case cas:
		q.Set("cas", strconv.FormatUint(modifyIndex, 10))
	}
	body, _, err := c.do(context.Background(), request{method: http.MethodDelete, path: kvPath(key), query: q, withDC: true})
	switch {
	case recurse:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! Did not delete prefix %s: %s\n", key, err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Deleted keys with prefix: %s\n", key)
	case cas:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error! Did not delete key %s: %s\n", key, err)
			return 1
		}
		var ok bool
		if json.Unmarshal(body, &ok) != nil || !ok {
			fmt.Fprintf(env.Stderr, "Error! Did not delete key %s: CAS failed\n", key)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Deleted key: %s\n", key)
	default:
		if err != nil {
			fmt.Fprintf(env.Stderr, "Error deleting key %s: %s\n", key, err)
			return 1
		}
		fmt.Fprintf(env.Stdout, "Success! Deleted key: %s\n", key)
	}
	return 0
}
