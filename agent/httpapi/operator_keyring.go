package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/trellis-mesh/trellis/structs"
)

// keyringBody is the body of POST, PUT and DELETE /v1/operator/keyring.
type keyringBody struct {
	Key string
}

// maxRelayFactor bounds ?relay-factor=, as Consul's.
const maxRelayFactor = 5

// operatorKeyring serves /v1/operator/keyring: GET lists every pool's
// keys with how many members hold each, POST installs a key on every
// member, PUT makes it the primary, DELETE removes it. The agent sends
// the operation to a server (itself on a server agent), which runs it
// across its pools; a pool that reports a failure makes the answer a 500
// naming the pool and the members' messages, as Consul's.
func (s *Server) operatorKeyring(_ http.ResponseWriter, r *http.Request) (any, error) {
	args := structs.KeyringRequest{}
	switch r.Method {
	case http.MethodGet:
		args.Operation = structs.KeyringList
	case http.MethodPost:
		args.Operation = structs.KeyringInstall
	case http.MethodPut:
		args.Operation = structs.KeyringUse
	case http.MethodDelete:
		args.Operation = structs.KeyringRemove
	}
	if args.Operation != structs.KeyringList {
		var body keyringBody
		if err := decodeRequest(r, &body); err != nil {
			return nil, err
		}
		args.Key = body.Key
	}
	args.Token = parseToken(r)
	// Any server may answer: keyrings travel over gossip, not Raft.
	args.AllowStale = true
	q := r.URL.Query()
	if v := q.Get("relay-factor"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("Error parsing relay factor: %v", err))
		}
		if n < 0 || n > maxRelayFactor {
			return nil, badRequest(fmt.Sprintf("Invalid relay-factor: Relay factor must be in range: [0, %d]", maxRelayFactor))
		}
		args.RelayFactor = uint8(n)
	}
	if v := q.Get("local-only"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, badRequest(fmt.Sprintf("Error parsing local-only: %v", err))
		}
		if b && args.Operation != structs.KeyringList {
			return nil, badRequest("Invalid use of local-only: local-only can only be set for list requests")
		}
		args.LocalOnly = b
	}
	var reply structs.KeyringResponses
	if err := structs.MethodInternalKeyringOperation.Call(r.Context(), s.rpc, &args, &reply); err != nil {
		return nil, err
	}
	if err := keyringErrors(reply.Responses); err != nil {
		return nil, err
	}
	if args.Operation != structs.KeyringList {
		return nil, nil
	}
	// Error is empty in every response here (omitted), so the pools
	// encode as consul/api's KeyringResponse.
	return reply.Responses, nil
}

// keyringErrors is the 500 for pools that reported a failure, worded as
// Consul's (a go-multierror list): each pool's error, then what each
// member said.
func keyringErrors(responses []*structs.KeyringResponse) error {
	var lines []string
	for _, kr := range responses {
		if kr.Error == "" {
			continue
		}
		pool := kr.Datacenter + " (LAN)"
		if kr.WAN {
			pool = "WAN"
		}
		lines = append(lines, fmt.Sprintf("%s error: %s", pool, kr.Error))
		for node, msg := range kr.Messages {
			lines = append(lines, fmt.Sprintf("%s: %s", node, msg))
		}
	}
	switch len(lines) {
	case 0:
		return nil
	case 1:
		return serverError("1 error occurred:\n\t* " + lines[0] + "\n\n")
	}
	return serverError(fmt.Sprintf("%d errors occurred:\n\t* %s\n\n", len(lines), strings.Join(lines, "\n\t* ")))
}
