package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// aclFilteredForExplicitAnonymous says whether a list the servers filter
// tells a caller that sent the anonymous token's secret explicitly.
// Consul masks the header only for a request with no token at all
// (maskResultsFilteredByACLs tests the token string for ""); the servers
// here withhold it from the anonymous token however it was named
// (server/acl_enforce.go, enforcer.after). The agent's own lists
// (agent/services, agent/checks) already follow Consul.
const aclFilteredForExplicitAnonymous = false

// srvFiltered are the callers told that a server-side list was filtered:
// ks, and the explicit anonymous caller where the servers tell it.
func srvFiltered(ks ...aclTok) []aclTok {
	if aclFilteredForExplicitAnonymous {
		return append(ks, tokAnon)
	}
	return ks
}

// Callers that pass each kind of rule.
var (
	allowReadOnly = []aclTok{tokRead, tokMgmt}           // read outside app prefixes
	allowAppRead  = []aclTok{tokRead, tokWrite, tokMgmt} // read of an app object
	allowAppWrite = []aclTok{tokWrite, tokMgmt}          // write of an app object
	allowMgmt     = []aclTok{tokMgmt}
)

// same gives every caller in ks the list items.
func same(items []string, ks ...aclTok) map[aclTok][]string {
	m := make(map[aclTok][]string, len(ks))
	for _, k := range ks {
		m[k] = items
	}
	return m
}

// with is m with caller k listing items.
func with(m map[aclTok][]string, k aclTok, items []string) map[aclTok][]string {
	m[k] = items
	return m
}

// matrixCases is the table: reads and lists first, against seedMatrix's
// objects, then the writes (which each caller makes on its own object).
func (f *aclFixture) matrixCases() []aclCase {
	var cases []aclCase
	cases = append(cases, f.kvCatalogReads()...)
	cases = append(cases, f.agentSessionReads()...)
	cases = append(cases, f.meshReads()...)
	cases = append(cases, f.followerCases()...)
	cases = append(cases, f.kvCatalogWrites()...)
	cases = append(cases, f.agentWrites()...)
	cases = append(cases, f.otherWrites()...)
	return cases
}

func (f *aclFixture) kvCatalogReads() []aclCase {
	allNodes := []string{seedAppNode, "client-0", seedDBNode, "server-0", "server-1", "server-2"}
	allServices := []string{"app-api", "app-web", "consul", "db", "db-agent"}
	allChecks := []string{"app-node/app-web-check", "client-0/serfHealth", "client-0/service:app-api", "client-0/service:db-agent",
		"db-node/db-check", "server-0/serfHealth", "server-1/serfHealth", "server-2/serfHealth"}
	appChecks := slices.DeleteFunc(slices.Clone(allChecks), func(c string) bool { return strings.Contains(c, "db") })
	return []aclCase{
		{name: "kv-get-app", method: "GET", path: "/v1/kv/app/a", allow: allowAppRead, perm: `'key:read' on "app/a"`},
		{name: "kv-get-other", method: "GET", path: "/v1/kv/other/b", allow: allowReadOnly, perm: `'key:read' on "other/b"`},
		{
			name: "kv-recurse", method: "GET", path: "/v1/kv/?recurse", allow: aclLive, list: listKeys,
			// Nothing readable is a 404, as for a prefix with no keys.
			status:   map[aclTok]int{tokNone: 404, tokAnon: 404},
			items:    with(same([]string{"app/a", "other/b"}, tokRead, tokMgmt), tokWrite, []string{"app/a"}),
			filtered: srvFiltered(tokWrite),
		},
		{
			name: "catalog-nodes", method: "GET", path: "/v1/catalog/nodes", allow: aclLive, list: listNodes,
			items: same(allNodes, tokRead, tokWrite, tokMgmt), filtered: srvFiltered(),
		},
		{
			name: "catalog-services", method: "GET", path: "/v1/catalog/services", allow: aclLive, list: mapKeys,
			items:    with(same(allServices, tokRead, tokMgmt), tokWrite, []string{"app-api", "app-web"}),
			filtered: srvFiltered(tokWrite),
		},
		{
			name: "catalog-service-app", method: "GET", path: "/v1/catalog/service/app-web", allow: aclLive, list: listNodes,
			items: same([]string{seedAppNode}, tokRead, tokWrite, tokMgmt), filtered: srvFiltered(),
		},
		{
			name: "catalog-service-db", method: "GET", path: "/v1/catalog/service/db", allow: aclLive, list: listNodes,
			items: same([]string{seedDBNode}, tokRead, tokMgmt), filtered: srvFiltered(tokWrite),
		},
		{
			name: "health-service-db", method: "GET", path: "/v1/health/service/db", allow: aclLive, list: listHealth,
			items: same([]string{seedDBNode}, tokRead, tokMgmt), filtered: srvFiltered(tokWrite),
		},
		{
			name: "health-service-app", method: "GET", path: "/v1/health/service/app-web", allow: aclLive, list: listHealth,
			items: same([]string{seedAppNode}, tokRead, tokWrite, tokMgmt), filtered: srvFiltered(),
		},
		{
			name: "health-checks-db", method: "GET", path: "/v1/health/checks/db", allow: aclLive, list: listChecks,
			items: same([]string{"db-node/db-check"}, tokRead, tokMgmt), filtered: srvFiltered(tokWrite),
		},
		{
			name: "health-state-any", method: "GET", path: "/v1/health/state/any", allow: aclLive, list: listChecks,
			items:    with(same(allChecks, tokRead, tokMgmt), tokWrite, appChecks),
			filtered: srvFiltered(tokWrite),
		},
	}
}

func (f *aclFixture) agentSessionReads() []aclCase {
	members := []string{"client-0", "server-0", "server-1", "server-2"}
	return []aclCase{
		{name: "agent-self", method: "GET", path: "/v1/agent/self", allow: allowReadOnly, perm: `'agent:read' on "client-0"`},
		{
			name: "agent-members", method: "GET", path: "/v1/agent/members", allow: aclLive, list: listNames,
			items: same(members, tokRead, tokWrite, tokMgmt), filtered: []aclTok{tokAnon},
		},
		{
			name: "agent-services", method: "GET", path: "/v1/agent/services", allow: aclLive, list: mapKeys,
			items:    with(same([]string{"app-api", "db-agent"}, tokRead, tokMgmt), tokWrite, []string{"app-api"}),
			filtered: []aclTok{tokAnon, tokWrite},
		},
		{
			name: "agent-checks", method: "GET", path: "/v1/agent/checks", allow: aclLive, list: mapKeys,
			items:    with(same([]string{"service:app-api", "service:db-agent"}, tokRead, tokMgmt), tokWrite, []string{"service:app-api"}),
			filtered: []aclTok{tokAnon, tokWrite},
		},
		{name: "agent-service-app", method: "GET", path: "/v1/agent/service/app-api", allow: allowAppRead, perm: `'service:read' on "app-api"`},
		{name: "agent-service-db", method: "GET", path: "/v1/agent/service/db-agent", allow: allowReadOnly, perm: `'service:read' on "db-agent"`},
		{
			name: "session-list", method: "GET", path: "/v1/session/list", allow: aclLive, list: listSessions,
			items:    with(same([]string{"s-client", "s-server"}, tokRead, tokMgmt), tokWrite, []string{"s-client"}),
			filtered: srvFiltered(tokWrite),
		},
		{
			name: "session-info-server", method: "GET", path: "/v1/session/info/" + f.serverSession, allow: aclLive, list: listSessions,
			items: same([]string{"s-server"}, tokRead, tokMgmt), filtered: srvFiltered(tokWrite),
		},
		{
			name: "event-list", method: "GET", path: "/v1/event/list", allow: aclLive, list: listNames,
			items: with(same([]string{"app-deploy", "other-deploy"}, tokRead, tokMgmt), tokWrite, []string{"app-deploy"}),
		},
	}
}

func (f *aclFixture) meshReads() []aclCase {
	tokensAs := func(hidden string) []string {
		out := []string{aclAnonymousAccessor + " " + hidden, f.initialAccessor + " " + hidden}
		for _, k := range []aclTok{tokRead, tokWrite, tokMgmt, tokExpired} {
			out = append(out, f.accessor[k]+" "+hidden)
		}
		slices.Sort(out)
		return out
	}
	return []aclCase{
		{
			name: "query-list", method: "GET", path: "/v1/query", allow: aclLive, list: listNames,
			items:    with(same([]string{"app-q", "db-q"}, tokRead, tokMgmt), tokWrite, []string{"app-q"}),
			filtered: srvFiltered(tokWrite),
		},
		{
			// Anyone may execute a query; its answer is filtered with the
			// caller's token.
			name: "query-execute", method: "GET", path: "/v1/query/app-q/execute", allow: aclLive, list: listExecute,
			items: same([]string{seedAppNode}, tokRead, tokWrite, tokMgmt), filtered: srvFiltered(),
		},
		{name: "config-get-service-app", method: "GET", path: "/v1/config/service-defaults/app-web", allow: allowAppRead, perm: `'service:read' on "app-web"`},
		{name: "config-get-service-db", method: "GET", path: "/v1/config/service-defaults/db", allow: allowReadOnly, perm: `'service:read' on "db"`},
		// proxy-defaults are readable by any token that resolves.
		{name: "config-get-proxy-defaults", method: "GET", path: "/v1/config/proxy-defaults/global", allow: aclLive},
		{
			name: "config-list-service-defaults", method: "GET", path: "/v1/config/service-defaults", allow: aclLive, list: listNames,
			items:    with(same([]string{"app-web", "db"}, tokRead, tokMgmt), tokWrite, []string{"app-web"}),
			filtered: srvFiltered(tokWrite),
		},
		{
			name: "intentions-list", method: "GET", path: "/v1/connect/intentions", allow: aclLive, list: listIntents,
			items:    with(same([]string{"web->app-web", "web->db"}, tokRead, tokMgmt), tokWrite, []string{"web->app-web"}),
			filtered: srvFiltered(tokWrite),
		},
		// Checking an intention reveals only allowed or not: service:read
		// on the destination.
		{name: "intentions-check-db", method: "GET", path: "/v1/connect/intentions/check?source=web&destination=db", allow: allowReadOnly, perm: `'service:read' on "db"`},
		{name: "connect-ca-roots", method: "GET", path: "/v1/connect/ca/roots", open: true},
		{name: "connect-ca-leaf-app", method: "GET", path: "/v1/agent/connect/ca/leaf/app-web", allow: allowAppWrite, perm: `'service:write' on "app-web"`},
		{name: "operator-raft-configuration", method: "GET", path: "/v1/operator/raft/configuration", allow: allowReadOnly, perm: `'operator:read'`},
		{name: "operator-autopilot-configuration", method: "GET", path: "/v1/operator/autopilot/configuration", allow: allowReadOnly, perm: `'operator:read'`},
		{
			name: "acl-tokens", method: "GET", path: "/v1/acl/tokens", allow: allowReadOnly, perm: `'acl:read'`, list: listTokens,
			items: map[aclTok][]string{tokRead: tokensAs("hidden"), tokMgmt: tokensAs("shown")},
		},
		{
			name: "acl-policies", method: "GET", path: "/v1/acl/policies", allow: allowReadOnly, perm: `'acl:read'`, list: listNames,
			items: same([]string{"builtin/global-read-only", "global-management", "read-everything", "write-app"}, tokRead, tokMgmt),
		},
		{name: "snapshot-save", method: "GET", path: "/v1/snapshot", allow: allowMgmt, perm: `'acl:write'`},
	}
}

// followerCases are sent to a follower, which forwards writes and
// default-consistency reads to the leader with the caller's token.
func (f *aclFixture) followerCases() []aclCase {
	return []aclCase{
		{name: "follower-kv-get-other", server: true, method: "GET", path: "/v1/kv/other/b", allow: allowReadOnly, perm: `'key:read' on "other/b"`},
		{
			name: "follower-kv-recurse-stale", server: true, method: "GET", path: "/v1/kv/?recurse&stale", allow: aclLive, list: listKeys,
			status:   map[aclTok]int{tokNone: 404, tokAnon: 404},
			items:    with(same([]string{"app/a", "other/b"}, tokRead, tokMgmt), tokWrite, []string{"app/a"}),
			filtered: srvFiltered(tokWrite),
		},
		{
			name: "follower-catalog-services", server: true, method: "GET", path: "/v1/catalog/services", allow: aclLive, list: mapKeys,
			items:    with(same([]string{"app-api", "app-web", "consul", "db", "db-agent"}, tokRead, tokMgmt), tokWrite, []string{"app-api", "app-web"}),
			filtered: srvFiltered(tokWrite),
		},
		{name: "follower-agent-self", server: true, method: "GET", path: "/v1/agent/self", allow: allowReadOnly, perm: fmt.Sprintf(`'agent:read' on %q`, f.follower.Node())},
		{name: "follower-operator-raft", server: true, method: "GET", path: "/v1/operator/raft/configuration", allow: allowReadOnly, perm: `'operator:read'`},
		{
			name: "follower-kv-put-other", server: true, method: "PUT", path: "/v1/kv/other/f-{tok}", body: "x", allow: allowMgmt, perm: `'key:write' on "other/f-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtStatus(ctx, "/v1/kv/other/f-"+k.String(), 404)
			},
		},
	}
}

// kvAbsent is the unchanged check of a write to key.
func (f *aclFixture) kvAbsent(key string) func(context.Context, aclTok, string) error {
	return func(ctx context.Context, k aclTok, _ string) error {
		return f.mgmtStatus(ctx, "/v1/kv/"+expandCase(key, k, ""), 404)
	}
}

// kvSeed writes key for the caller.
func (f *aclFixture) kvSeed(key string) func(context.Context, aclTok) (string, error) {
	return func(ctx context.Context, k aclTok) (string, error) {
		_, err := f.mgmtDo(ctx, 200, "PUT", "/v1/kv/"+expandCase(key, k, ""), "seed")
		return "", err
	}
}

// catalogNodeAbsent: GET /v1/catalog/node/<n> answers null for a node
// that is not registered.
func (f *aclFixture) catalogNode(ctx context.Context, node string) (bool, error) {
	b, err := f.mgmtDo(ctx, 200, "GET", "/v1/catalog/node/"+node, "")
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(string(b)) != "null", nil
}

func (f *aclFixture) kvCatalogWrites() []aclCase {
	nodeIs := func(node string, want bool) func(context.Context, aclTok, string) error {
		return func(ctx context.Context, k aclTok, _ string) error {
			got, err := f.catalogNode(ctx, expandCase(node, k, ""))
			if err == nil && got != want {
				err = fmt.Errorf("node %s registered: %v", expandCase(node, k, ""), got)
			}
			return err
		}
	}
	return []aclCase{
		{
			name: "kv-put-app", method: "PUT", path: "/v1/kv/app/w-{tok}", body: "x", allow: allowAppWrite,
			perm: `'key:write' on "app/w-{tok}"`, unchanged: f.kvAbsent("app/w-{tok}"),
		},
		{
			name: "kv-put-other", method: "PUT", path: "/v1/kv/other/w-{tok}", body: "x", allow: allowMgmt,
			perm: `'key:write' on "other/w-{tok}"`, unchanged: f.kvAbsent("other/w-{tok}"),
		},
		{
			name: "kv-delete-app", method: "DELETE", path: "/v1/kv/app/d-{tok}", allow: allowAppWrite, seed: f.kvSeed("app/d-{tok}"),
			perm: `'key:write' on "app/d-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtStatus(ctx, "/v1/kv/app/d-"+k.String(), 200)
			},
		},
		{
			name: "kv-delete-recurse-app", method: "DELETE", path: "/v1/kv/app/rd-{tok}/?recurse", allow: allowAppWrite, seed: f.kvSeed("app/rd-{tok}/x"),
			perm: `'key:write' on "app/rd-{tok}/"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtStatus(ctx, "/v1/kv/app/rd-"+k.String()+"/x", 200)
			},
		},
		{
			name: "catalog-register-app", method: "PUT", path: "/v1/catalog/register",
			body:  `{"Node":"app-n-{tok}","Address":"10.1.0.1","Service":{"Service":"app-svc","Port":1}}`,
			allow: allowAppWrite, perm: `'node:write' on "app-n-{tok}"`, unchanged: nodeIs("app-n-{tok}", false),
		},
		{
			name: "catalog-register-db", method: "PUT", path: "/v1/catalog/register",
			body:  `{"Node":"db-n-{tok}","Address":"10.1.0.2","Service":{"Service":"db","Port":1}}`,
			allow: allowMgmt, perm: `'node:write' on "db-n-{tok}"`, unchanged: nodeIs("db-n-{tok}", false),
		},
		{
			name: "catalog-deregister-app", method: "PUT", path: "/v1/catalog/deregister", body: `{"Node":"app-dn-{tok}"}`,
			seed: func(ctx context.Context, k aclTok) (string, error) {
				_, err := f.mgmtDo(ctx, 200, "PUT", "/v1/catalog/register", expandCase(`{"Node":"app-dn-{tok}","Address":"10.1.0.3"}`, k, ""))
				return "", err
			},
			allow: allowAppWrite, perm: `'node:write' on "app-dn-{tok}"`, unchanged: nodeIs("app-dn-{tok}", true),
		},
	}
}

// agentServiceIs checks whether the client agent has service id.
func (f *aclFixture) agentServiceIs(id string, want bool) func(context.Context, aclTok, string) error {
	return func(ctx context.Context, k aclTok, _ string) error {
		status := 404
		if want {
			status = 200
		}
		return f.mgmtStatus(ctx, "/v1/agent/service/"+expandCase(id, k, ""), status)
	}
}

// agentCheckStatus is the status of the client agent's check id.
func (f *aclFixture) agentCheckStatus(ctx context.Context, id string) (string, error) {
	b, err := f.mgmtDo(ctx, 200, "GET", "/v1/agent/checks", "")
	if err != nil {
		return "", err
	}
	var checks map[string]struct{ Status string }
	if err := json.Unmarshal(b, &checks); err != nil {
		return "", err
	}
	c, ok := checks[id]
	if !ok {
		return "absent", nil
	}
	return c.Status, nil
}

func (f *aclFixture) agentWrites() []aclCase {
	register := func(def string) func(context.Context, aclTok) (string, error) {
		return func(ctx context.Context, k aclTok) (string, error) {
			_, err := f.mgmtDo(ctx, 200, "PUT", "/v1/agent/service/register", expandCase(def, k, ""))
			return "", err
		}
	}
	checkIs := func(id, want string) func(context.Context, aclTok, string) error {
		return func(ctx context.Context, k aclTok, _ string) error {
			got, err := f.agentCheckStatus(ctx, expandCase(id, k, ""))
			if err == nil && got != want {
				err = fmt.Errorf("check %s is %s, want %s", expandCase(id, k, ""), got, want)
			}
			return err
		}
	}
	maintOff := func(path string) func(context.Context, aclTok, string) error {
		return func(ctx context.Context, _ aclTok, _ string) error {
			_, err := f.mgmtDo(ctx, 200, "PUT", path+"?enable=false", "")
			return err
		}
	}
	return []aclCase{
		{
			name: "agent-service-register-app", method: "PUT", path: "/v1/agent/service/register", body: `{"Name":"app-r-{tok}"}`,
			allow: allowAppWrite, perm: `'service:write' on "app-r-{tok}"`, unchanged: f.agentServiceIs("app-r-{tok}", false),
		},
		{
			name: "agent-service-register-db", method: "PUT", path: "/v1/agent/service/register", body: `{"Name":"db-r-{tok}"}`,
			allow: allowMgmt, perm: `'service:write' on "db-r-{tok}"`, unchanged: f.agentServiceIs("db-r-{tok}", false),
		},
		{
			name: "agent-service-deregister-app", method: "PUT", path: "/v1/agent/service/deregister/app-d-{tok}",
			seed: register(`{"Name":"app-d-{tok}"}`), allow: allowAppWrite, perm: `'service:write' on "app-d-{tok}"`,
			unchanged: f.agentServiceIs("app-d-{tok}", true),
		},
		{
			name: "agent-check-pass-app", method: "PUT", path: "/v1/agent/check/pass/service:app-c-{tok}",
			seed: register(`{"Name":"app-c-{tok}","Check":{"TTL":"10m"}}`), allow: allowAppWrite, perm: `'service:write' on "app-c-{tok}"`,
			unchanged: checkIs("service:app-c-{tok}", "critical"),
		},
		{
			name: "agent-maintenance", method: "PUT", path: "/v1/agent/maintenance?enable=true&reason=matrix",
			allow: allowMgmt, perm: `'node:write' on "client-0"`,
			unchanged: checkIs("_node_maintenance", "absent"), undo: maintOff("/v1/agent/maintenance"),
		},
		{
			name: "agent-service-maintenance-app", method: "PUT", path: "/v1/agent/service/maintenance/app-api?enable=true&reason=matrix",
			allow: allowAppWrite, perm: `'service:write' on "app-api"`,
			unchanged: checkIs("_service_maintenance:app-api", "absent"), undo: maintOff("/v1/agent/service/maintenance/app-api"),
		},
		{
			name: "session-create", method: "PUT", path: "/v1/session/create", body: `{"Name":"new-{tok}"}`,
			allow: allowAppWrite, perm: `'session:write' on "client-0"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtLacks(ctx, "/v1/session/list", listSessions, "new-"+k.String())
			},
		},
		{
			name: "session-destroy", method: "PUT", path: "/v1/session/destroy/{seed}",
			seed: func(ctx context.Context, k aclTok) (string, error) {
				b, err := f.mgmtDo(ctx, 200, "PUT", "/v1/session/create", expandCase(`{"Name":"gone-{tok}"}`, k, ""))
				if err != nil {
					return "", err
				}
				var s struct{ ID string }
				return s.ID, json.Unmarshal(b, &s)
			},
			allow: allowAppWrite, perm: `'session:write' on "client-0"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtHas(ctx, "/v1/session/list", listSessions, "gone-"+k.String())
			},
		},
		{
			name: "event-fire-app", method: "PUT", path: "/v1/event/fire/app-e-{tok}", allow: allowAppWrite, perm: `'event:write' on "app-e-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtLacks(ctx, "/v1/event/list", listNames, "app-e-"+k.String())
			},
		},
		{
			name: "event-fire-other", method: "PUT", path: "/v1/event/fire/other-e-{tok}", allow: allowMgmt, perm: `'event:write' on "other-e-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtLacks(ctx, "/v1/event/list", listNames, "other-e-"+k.String())
			},
		},
	}
}
