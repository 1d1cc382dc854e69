package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
)

const keygenHelp = `
Usage: trellis keygen

  Generates a new encryption key that can be used to configure the
  agent to encrypt traffic. The output of this command is already
  in the proper format that the agent expects.`

// keygenBytes is the key size keygen prints: 32 bytes selects AES-256, as
// Consul's keygen does.
const keygenBytes = 32

func runKeygen(args []string, env *Env) int {
	fs := newFlagSet("keygen", keygenHelp, env.Stderr)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	key := make([]byte, keygenBytes)
	if _, err := rand.Read(key); err != nil {
		fmt.Fprintf(env.Stderr, "Error reading random data: %s\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, base64.StdEncoding.EncodeToString(key))
	return 0
}

const keyringHelp = `
Usage: trellis keyring [options]

  Manages encryption keys used for gossip messages. Gossip encryption is
  optional. When enabled, this command may be used to examine active
  encryption keys in the cluster, add new keys, and remove old ones. When
  combined, this functionality provides the ability to perform key rotation
  cluster-wide, without disrupting the cluster.

  All operations performed by this command can only be run against server
  nodes, and affect both the LAN and WAN keyrings in lock-step.

  All variations of the keyring command return 0 if all nodes reply and
  there are no errors. If any node fails to reply or reports failure, the
  exit code will be 1.`

// keyringEntry is one pool of GET /v1/operator/keyring.
type keyringEntry struct {
	WAN         bool
	Datacenter  string
	Segment     string
	Keys        map[string]int
	PrimaryKeys map[string]int
	NumNodes    int
}

func runKeyring(args []string, env *Env) int {
	var hf httpFlags
	var install, use, remove string
	var list, listPrimary, localOnly bool
	var relay int
	fs := newFlagSet("keyring", keyringHelp, env.Stderr)
	fs.StringVar(&install, "install", "", "Install a new encryption key. This will broadcast the new key to all members in the cluster.")
	fs.StringVar(&use, "use", "", "Change the primary encryption key, which is used to encrypt messages. The key must already be installed before this operation can succeed.")
	fs.StringVar(&remove, "remove", "", "Remove the given key from the cluster. This operation may only be performed on keys which are not currently the primary key.")
	fs.BoolVar(&list, "list", false, "List all keys currently in use within the cluster.")
	fs.BoolVar(&listPrimary, "list-primary", false, "List all primary keys currently in use within the cluster.")
	fs.BoolVar(&localOnly, "local-only", false, "Setting this to true will force the keyring query to only hit local servers (no WAN traffic). This flag can only be set for list queries.")
	fs.IntVar(&relay, "relay-factor", 0, "Setting this to a non-zero value will cause nodes to relay their response to the operation through this many randomly-chosen other nodes in the cluster. The maximum allowed value is 5.")
	hf.register(fs, false)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	actions := 0
	for _, set := range []bool{install != "", use != "", remove != "", list, listPrimary} {
		if set {
			actions++
		}
	}
	switch {
	case actions == 0:
		fmt.Fprintln(env.Stderr, keyringHelp)
		return 1
	case actions > 1:
		fmt.Fprintln(env.Stderr, "Only a single action is allowed")
		return 1
	case relay < 0 || relay > 5:
		fmt.Fprintln(env.Stderr, "Error parsing relay factor: Relay factor must be in range: [0, 5]")
		return 1
	case localOnly && !list && !listPrimary:
		fmt.Fprintln(env.Stderr, "Error validating local-only: local-only can only be set for list requests")
		return 1
	}
	c, ok := hf.connect(env)
	if !ok {
		return 1
	}
	q := url.Values{}
	if relay > 0 {
		q.Set("relay-factor", strconv.Itoa(relay))
	}
	ctx := context.Background()
	if list || listPrimary {
		fmt.Fprintln(env.Stdout, "==> Gathering installed encryption keys...")
		if localOnly {
			q.Set("local-only", "true")
		}
		var pools []keyringEntry
		if err := c.getJSON(ctx, "/v1/operator/keyring", q, false, &pools); err != nil {
			fmt.Fprintf(env.Stderr, "error: %s\n", err)
			return 1
		}
		printKeyring(env, pools, listPrimary)
		return 0
	}
	op := []struct {
		key, method, banner string
	}{
		{install, http.MethodPost, "==> Installing new gossip encryption key..."},
		{use, http.MethodPut, "==> Changing primary gossip encryption key..."},
		{remove, http.MethodDelete, "==> Removing gossip encryption key..."},
	}
	for _, o := range op {
		if o.key == "" {
			continue
		}
		fmt.Fprintln(env.Stdout, o.banner)
		body, err := json.Marshal(map[string]string{"Key": o.key})
		if err != nil {
			fmt.Fprintf(env.Stderr, "error: %s\n", err)
			return 1
		}
		r := request{method: o.method, path: "/v1/operator/keyring", query: q, body: bytes.NewReader(body)}
		if _, _, err := c.do(ctx, r); err != nil {
			fmt.Fprintf(env.Stderr, "error: %s\n", err)
			return 1
		}
	}
	return 0
}

// printKeyring lists each pool's keys (or primary keys) with how many of
// the pool's members hold it, as Consul's keyring -list does.
func printKeyring(env *Env, pools []keyringEntry, primary bool) {
	for _, p := range pools {
		name := p.Datacenter + " (LAN)"
		if p.Segment != "" {
			name += fmt.Sprintf(" [%s]", p.Segment)
		}
		if p.WAN {
			name = "WAN"
		}
		keys := p.Keys
		if primary {
			keys = p.PrimaryKeys
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintln(env.Stdout)
		fmt.Fprintln(env.Stdout, name+":")
		for _, k := range names {
			fmt.Fprintf(env.Stdout, "  %s [%d/%d]\n", k, keys[k], p.NumNodes)
		}
	}
}
