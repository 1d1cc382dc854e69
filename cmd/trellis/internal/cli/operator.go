package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

type raftServer struct {
	ID              string
	Node            string
	Address         string
	Leader          bool
	ProtocolVersion string
	Voter           bool
}

type autopilotServer struct {
	ID        string
	LastIndex uint64
}

const raftListPeersHelp = `
Usage: trellis operator raft list-peers [options]

  Displays the current Raft peer configuration.`

func runRaftListPeers(args []string, env *Env) int {
	var hf httpFlags
	fs := newFlagSet("operator raft list-peers", raftListPeersHelp, env.Stderr)
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error initializing client: %s\n", err)
		return 1
	}
	ctx := context.Background()
	var cfg struct{ Servers []raftServer }
	if err := c.getJSON(ctx, "/v1/operator/raft/configuration", nil, true, &cfg); err != nil {
		fmt.Fprintf(env.Stderr, "Error getting peers: Failed to retrieve raft configuration: %v\n", err)
		return 1
	}

	// Consul adds commit indexes from autopilot health. An agent without
	// that endpoint still gets the peer table, without those columns.
	health, haveHealth := autopilotHealth(ctx, c)
	var leaderIndex uint64
	for _, s := range cfg.Servers {
		if h, ok := health[s.ID]; ok && s.Leader {
			leaderIndex = h.LastIndex
		}
	}
	header := []string{"Node", "ID", "Address", "State", "Voter", "RaftProtocol"}
	if haveHealth {
		header = append(header, "Commit Index", "Trails Leader By")
	}
	rows := []string{strings.Join(header, columnSep)}
	for _, s := range cfg.Servers {
		proto := s.ProtocolVersion
		if proto == "" {
			proto = "<=1"
		}
		state := "follower"
		if s.Leader {
			state = "leader"
		}
		row := []string{s.Node, s.ID, s.Address, state, fmt.Sprint(s.Voter), proto}
		if haveHealth {
			if h, ok := health[s.ID]; ok {
				trails := leaderIndex - h.LastIndex
				if h.LastIndex > leaderIndex {
					trails = 0
				}
				text := fmt.Sprintf("%d Commits", trails)
				switch {
				case s.Leader:
					text = "_"
				case trails <= 1:
					text = fmt.Sprintf("%d Commit", trails)
				}
				row = append(row, fmt.Sprint(h.LastIndex), text)
			} else {
				row = append(row, "_")
			}
		}
		rows = append(rows, strings.Join(row, columnSep))
	}
	fmt.Fprintln(env.Stdout, columnize(rows))
	return 0
}

const raftRemovePeerHelp = `
Usage: trellis operator raft remove-peer [options] -address=IP:port | -id=ID

  Removes the server with the given address or ID from the Raft
  configuration. For a server that will not come back: one that is still
  alive in the cluster's gossip is added back. Removing too many servers
  can leave the cluster without a quorum.`

func runRaftRemovePeer(args []string, env *Env) int {
	var (
		hf          httpFlags
		address, id string
	)
	fs := newFlagSet("operator raft remove-peer", raftRemovePeerHelp, env.Stderr)
	fs.StringVar(&address, "address", "", "The `IP:port` of the server to remove.")
	fs.StringVar(&id, "id", "", "The ID of the server to remove.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	var q url.Values
	switch {
	case address == "" && id == "":
		fmt.Fprintln(env.Stderr, "Error removing peer: an address or id is required for the peer to remove")
		return 2
	case address != "" && id != "":
		fmt.Fprintln(env.Stderr, "Error removing peer: cannot give both an address and id")
		return 2
	case address != "":
		q = url.Values{"address": {address}}
	default:
		q = url.Values{"id": {id}}
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error initializing client: %s\n", err)
		return 1
	}
	if _, _, err := c.do(context.Background(), request{method: http.MethodDelete, path: "/v1/operator/raft/peer", query: withDCQuery(q, c)}); err != nil {
		fmt.Fprintf(env.Stderr, "Error removing peer: %v\n", err)
		return 2
	}
	if address != "" {
		fmt.Fprintf(env.Stdout, "Removed peer with address %q\n", address)
	} else {
		fmt.Fprintf(env.Stdout, "Removed peer with id %q\n", id)
	}
	return 0
}

// autopilotHealth fetches /v1/operator/autopilot/health, which answers 429
// (with the same body) when the cluster is unhealthy.
func autopilotHealth(ctx context.Context, c *apiClient) (map[string]autopilotServer, bool) {
	var reply struct{ Servers []autopilotServer }
	body, _, err := c.do(ctx, request{method: http.MethodGet, path: "/v1/operator/autopilot/health", withDC: true})
	var se *StatusError
	if errors.As(err, &se) && se.Code == http.StatusTooManyRequests {
		body, err = []byte(se.Body), nil
	}
	if err != nil || json.Unmarshal(body, &reply) != nil {
		return nil, false
	}
	out := make(map[string]autopilotServer, len(reply.Servers))
	for _, s := range reply.Servers {
		out[s.ID] = s
	}
	return out, true
}

const raftTransferLeaderHelp = `
Usage: trellis operator raft transfer-leader [options] [-id=ID]

  Makes the leader hand its leadership to the server with the given ID,
  or to any other voter when no ID is given.`

func runRaftTransferLeader(args []string, env *Env) int {
	var (
		hf httpFlags
		id string
	)
	fs := newFlagSet("operator raft transfer-leader", raftTransferLeaderHelp, env.Stderr)
	fs.StringVar(&id, "id", "", "The ID of the server to transfer leadership to.")
	hf.register(fs, true)
	if code, ok := parseFlags(fs, args); !ok {
		return code
	}
	c, err := hf.client(env)
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error initializing client: %s\n", err)
		return 1
	}
	var q url.Values
	if id != "" {
		q = url.Values{"id": {id}}
	}
	body, _, err := c.do(context.Background(), request{method: http.MethodPost, path: "/v1/operator/raft/transfer-leader", query: q, withDC: true})
	var reply struct{ Success bool }
	if err == nil {
		err = json.Unmarshal(body, &reply)
	}
	if err == nil && !reply.Success {
		err = errors.New("the leader did not transfer its leadership")
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "Error transferring leadership: %v\n", err)
		return 1
	}
	fmt.Fprintln(env.Stdout, "Success")
	return 0
}
