package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// otherWrites: prepared queries, config entries, intentions and
// transactions.
func (f *aclFixture) otherWrites() []aclCase {
	configAbsent := func(kind, name string) func(context.Context, aclTok, string) error {
		return func(ctx context.Context, k aclTok, _ string) error {
			return f.mgmtStatus(ctx, "/v1/config/"+kind+"/"+expandCase(name, k, ""), 404)
		}
	}
	return []aclCase{
		{
			name: "query-create-app", method: "POST", path: "/v1/query", body: `{"Name":"app-q-{tok}","Service":{"Service":"app-web"}}`,
			allow: allowAppWrite, perm: `'query:write' on "app-q-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtLacks(ctx, "/v1/query", listNames, "app-q-"+k.String())
			},
		},
		{
			name: "query-create-db", method: "POST", path: "/v1/query", body: `{"Name":"db-q-{tok}","Service":{"Service":"db"}}`,
			allow: allowMgmt, perm: `'query:write' on "db-q-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtLacks(ctx, "/v1/query", listNames, "db-q-"+k.String())
			},
		},
		{
			name: "config-put-service-defaults-app", method: "PUT", path: "/v1/config",
			body:  `{"Kind":"service-defaults","Name":"app-cd-{tok}","Protocol":"http"}`,
			allow: allowAppWrite, perm: `'service:write' on "app-cd-{tok}"`, unchanged: configAbsent("service-defaults", "app-cd-{tok}"),
		},
		{
			name: "config-put-service-defaults-db", method: "PUT", path: "/v1/config",
			body:  `{"Kind":"service-defaults","Name":"db-cd-{tok}","Protocol":"tcp"}`,
			allow: allowMgmt, perm: `'service:write' on "db-cd-{tok}"`, unchanged: configAbsent("service-defaults", "db-cd-{tok}"),
		},
		{
			name: "config-put-proxy-defaults", method: "PUT", path: "/v1/config",
			body:  `{"Kind":"proxy-defaults","Name":"global","Meta":{"by":"{tok}"}}`,
			allow: allowMgmt, perm: `'mesh:write'`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				b, err := f.mgmtDo(ctx, 200, "GET", "/v1/config/proxy-defaults/global", "")
				if err != nil {
					return err
				}
				var e struct{ Meta map[string]string }
				if err := json.Unmarshal(b, &e); err != nil {
					return err
				}
				if e.Meta["by"] == k.String() {
					return fmt.Errorf("proxy-defaults written by %s", k)
				}
				return nil
			},
		},
		{
			name: "intention-create-app", method: "PUT", path: "/v1/connect/intentions/exact?source=web&destination=app-i-{tok}",
			body: `{"Action":"allow"}`, allow: allowAppWrite, perm: `'intention:write' on "app-i-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtStatus(ctx, "/v1/connect/intentions/exact?source=web&destination=app-i-"+k.String(), 404)
			},
		},
		{
			name: "intention-create-db", method: "PUT", path: "/v1/connect/intentions/exact?source=web&destination=db-i-{tok}",
			body: `{"Action":"allow"}`, allow: allowMgmt, perm: `'intention:write' on "db-i-{tok}"`,
			unchanged: func(ctx context.Context, k aclTok, _ string) error {
				return f.mgmtStatus(ctx, "/v1/connect/intentions/exact?source=web&destination=db-i-"+k.String(), 404)
			},
		},
		{
			// Reads in a transaction are not refused: what the token may
			// not read is left out of the results.
			name: "txn-gets-filtered", method: "PUT", path: "/v1/txn",
			body:  `[{"KV":{"Verb":"get","Key":"app/a"}},{"KV":{"Verb":"get","Key":"other/b"}}]`,
			allow: aclLive, list: listTxnKeys,
			items: with(same([]string{"app/a", "other/b"}, tokRead, tokMgmt), tokWrite, []string{"app/a"}),
		},
		f.txnCase("txn-app-and-other", []string{"app/t-{tok}", "other/t-{tok}"}, allowMgmt, map[aclTok][]int{
			tokNone: {0, 1}, tokAnon: {0, 1}, tokRead: {0, 1}, tokWrite: {1},
		}),
		f.txnCase("txn-app", []string{"app/t1-{tok}"}, allowAppWrite, map[aclTok][]int{
			tokNone: {0}, tokAnon: {0}, tokRead: {0},
		}),
	}
}

// listTxnKeys lists the keys of a transaction's KV results.
func listTxnKeys(b []byte) ([]string, error) {
	var r struct{ Results json.RawMessage }
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("decode %q: %w", b, err)
	}
	if len(r.Results) == 0 || string(r.Results) == "null" {
		return nil, nil
	}
	return sortedJSON(func(e struct{ KV struct{ Key string } }) string { return e.KV.Key })(r.Results)
}

// txnCase is a transaction setting each of keys: all or nothing on
// permissions, so that a caller refused one operation gets 409 with
// Consul's denial for each refused operation, and none is applied.
func (f *aclFixture) txnCase(name string, keys []string, allow []aclTok, refused map[aclTok][]int) aclCase {
	var ops []string
	for _, k := range keys {
		ops = append(ops, fmt.Sprintf(`{"KV":{"Verb":"set","Key":%q,"Value":"eA=="}}`, k))
	}
	return aclCase{
		name: name, method: "PUT", path: "/v1/txn", body: "[" + strings.Join(ops, ",") + "]", allow: allow,
		expect: func(k aclTok, r aclResp) error {
			switch {
			case slices.Contains(allow, k):
				if r.status != 200 {
					return fmt.Errorf("got %s, want 200", r)
				}
				return nil
			case k == tokDeleted || k == tokExpired:
				if r.status != 403 || strings.TrimSpace(string(r.body)) != aclNotFound {
					return fmt.Errorf("got %s, want 403 ACL not found", r)
				}
				return nil
			}
			var body struct {
				Results []json.RawMessage
				Errors  []struct {
					OpIndex int
					What    string
				}
			}
			if r.status != 409 {
				return fmt.Errorf("got %s, want 409", r)
			}
			if err := json.Unmarshal(r.body, &body); err != nil {
				return fmt.Errorf("decode %s: %w", r, err)
			}
			var got []int
			for _, e := range body.Errors {
				got = append(got, e.OpIndex)
				if want := f.deniedText(k, fmt.Sprintf(`'key:write' on %q`, expandCase(keys[e.OpIndex], k, ""))); e.What != want {
					return fmt.Errorf("error of op %d is %q, want %q", e.OpIndex, e.What, want)
				}
			}
			if !slices.Equal(got, refused[k]) || len(body.Results) != 0 {
				return fmt.Errorf("refused ops %v with %d results, want %v and none", got, len(body.Results), refused[k])
			}
			return nil
		},
		unchanged: func(ctx context.Context, k aclTok, _ string) error {
			for _, key := range keys {
				if err := f.kvAbsent(key)(ctx, k, ""); err != nil {
					return err
				}
			}
			return nil
		},
	}
}
