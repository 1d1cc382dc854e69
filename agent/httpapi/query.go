package httpapi

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// parseRawQuery parses a query string strictly, as Consul's wrapper does
// before anything else (r.URL.Query silently drops what it cannot parse).
func parseRawQuery(raw string) (url.Values, error) {
	return url.ParseQuery(raw)
}

// parseDC returns ?dc, or this agent's datacenter.
func (s *Server) parseDC(r *http.Request) string {
	if dc := r.URL.Query().Get("dc"); dc != "" {
		return dc
	}
	return s.dc
}

// parseToken returns the ACL token in Consul's order of precedence:
// ?token, then X-Consul-Token, then "Authorization: Bearer".
func parseToken(r *http.Request) string {
	if t := r.URL.Query().Get("token"); t != "" {
		return t
	}
	if t := r.Header.Get("X-Consul-Token"); t != "" {
		return t
	}
	if auth := r.Header.Get("Authorization"); auth != "" {
		if scheme, tok, ok := strings.Cut(auth, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// parseWrite fills the options every write carries.
func (s *Server) parseWrite(r *http.Request, w *structs.WriteRequest) {
	w.Datacenter = s.parseDC(r)
	w.Token = parseToken(r)
}

// parseQuery fills the options every read carries, in Consul's order: the
// datacenter, the token, ?filter, the consistency mode, then ?wait and
// ?index. The first invalid parameter wins, with Consul's 400 message.
// Limits on wait (default and maximum) are applied by the server.
func (s *Server) parseQuery(r *http.Request, q *structs.QueryOptions) error {
	params := r.URL.Query()
	q.Datacenter = s.parseDC(r)
	q.Token = parseToken(r)
	if f := params.Get("filter"); f != "" {
		q.Filter = f
	}
	if _, ok := params["stale"]; ok {
		q.AllowStale = true
	}
	if _, ok := params["consistent"]; ok {
		q.RequireConsistent = true
	}
	if q.AllowStale && q.RequireConsistent {
		return badRequest("Cannot specify ?stale with ?consistent, conflicting semantics.")
	}
	if wait := params.Get("wait"); wait != "" {
		d, err := time.ParseDuration(wait)
		if err != nil {
			return badRequest("Invalid wait time")
		}
		q.MaxQueryTime = d
	}
	if idx := params.Get("index"); idx != "" {
		n, err := strconv.ParseUint(idx, 10, 64)
		if err != nil {
			return badRequest("Invalid index")
		}
		q.MinQueryIndex = n
	}
	return nil
}

// parseMetaFilter reads Consul's repeatable ?node-meta=key:value filter.
func parseMetaFilter(r *http.Request) map[string]string {
	values, ok := r.URL.Query()["node-meta"]
	if !ok {
		return nil
	}
	out := make(map[string]string, len(values))
	for _, v := range values {
		key, value, _ := strings.Cut(v, ":")
		out[key] = value
	}
	return out
}

// parseTags reads the repeatable ?tag= filter; TagFilter is set whenever
// the parameter appears, as in Consul.
func parseTags(r *http.Request) (tags []string, filter bool) {
	tags, filter = r.URL.Query()["tag"]
	return tags, filter
}

// parseBoolFlag reads a flag such as ?passing: present without a value
// means true, otherwise the value must parse as a bool.
func parseBoolFlag(r *http.Request, name string) (value, ok bool) {
	params := r.URL.Query()
	if _, present := params[name]; !present {
		return false, true
	}
	v := params.Get(name)
	if v == "" {
		return true, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, false
	}
	return b, true
}

// pathSuffix returns what follows prefix in the (decoded) request path: a
// service, node, key or session named in the URL.
func pathSuffix(r *http.Request, prefix string) string {
	return strings.TrimPrefix(r.URL.Path, prefix)
}
