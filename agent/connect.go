package agent

import (
	"context"
	"fmt"
	"time"

	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/leafcert"
	"github.com/trellis-mesh/trellis/connect"
	"github.com/trellis-mesh/trellis/connect/intentions"
	"github.com/trellis-mesh/trellis/structs"
)

// Connect wiring: the leaf certificate manager and the authorize endpoint.

// startConnect starts the agent's leaf certificate manager. It signs
// through the agent's RPC path (the local server on a server agent, the
// servers on a client agent) and watches the CA roots until Stop.
func (a *Agent) startConnect() (*leafcert.Manager, error) {
	m, err := leafcert.New(leafcert.Config{
		RPC:        a,
		Datacenter: a.rc.Datacenter,
		Logger:     a.logger.With("component", "leafcert"),
		// A leaf asked for without a token is signed with the default
		// token, as Consul's agent answers requests that carry none.
		Token: a.tokens.UserToken,
		// Zero in leafcert means its default; a negative value, at once.
		RootChangeJitter: a.rootChangeJitter,
	})
	if err != nil {
		return nil, err
	}
	m.Start()
	return m, nil
}

// connectHTTPConfig returns the Connect dependencies of the HTTP API: the
// leaf manager, and an authorizer that decides by intentions.
func (a *Agent) connectHTTPConfig(leaf *leafcert.Manager) (httpapi.LeafCerts, httpapi.ConnectAuthorizer) {
	var lc httpapi.LeafCerts
	if leaf != nil {
		lc = httpLeafCerts{leaf}
	}
	return lc, intentionAuthorizer{rpc: a, dc: a.rc.Datacenter}
}

// httpLeafCerts gives the HTTP API the leaf manager's answers with its
// cache metadata in the API's own type.
type httpLeafCerts struct{ m *leafcert.Manager }

func (h httpLeafCerts) GetWithMeta(ctx context.Context, service, token string, minIndex uint64, wait time.Duration) (*structs.IssuedCert, httpapi.LeafMeta, error) {
	cert, meta, err := h.m.GetWithMeta(ctx, service, token, minIndex, wait)
	return cert, httpapi.LeafMeta{Hit: meta.Hit, Age: meta.Age}, err
}

// intentionAuthorizer answers /v1/agent/connect/authorize from the
// intentions that apply to the target, as Consul does: the
// highest-precedence matching intention decides (one with L7 permissions
// denies a plain connection, which cannot be checked at L4), and without
// one the servers' default policy does.
type intentionAuthorizer struct {
	rpc structs.Caller
	dc  string
}

func (z intentionAuthorizer) ConnectAuthorize(ctx context.Context, target string, client *connect.SpiffeIDService, _ string) (bool, string, error) {
	var matches structs.IndexedIntentionMatches
	err := structs.MethodIntentionMatch.Call(ctx, z.rpc, &structs.IntentionQueryRequest{
		Match:        &structs.IntentionQueryMatch{Type: structs.IntentionMatchDestination, Names: []string{target}},
		QueryOptions: structs.QueryOptions{Datacenter: z.dc, AllowStale: true},
	}, &matches)
	if err != nil {
		return false, "", err
	}
	var ixns structs.Intentions
	for _, m := range matches.Matches {
		ixns = append(ixns, m...)
	}
	d := intentions.Evaluate(ixns, client.Service, target, false, nil)
	if d.Intention != nil {
		kind := "L4"
		if d.HasPermissions {
			kind = "L7"
		}
		return d.Allowed, fmt.Sprintf("Matched %s intention: %s", kind, d.Intention), nil
	}
	var check structs.IntentionQueryCheckResponse
	err = structs.MethodIntentionCheck.Call(ctx, z.rpc, &structs.IntentionQueryRequest{
		Check:        &structs.IntentionQueryCheck{SourceName: client.Service, DestinationName: target, SourceType: structs.IntentionSourceConsul},
		QueryOptions: structs.QueryOptions{Datacenter: z.dc, AllowStale: true},
	}, &check)
	if err != nil {
		return false, "", err
	}
	return check.Allowed, "Default behavior configured by ACLs", nil
}
