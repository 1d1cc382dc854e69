package httpapi

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/agent/cache"
	"github.com/trellis-mesh/trellis/structs"
)

// Cache answers reads from the agent's cache (agent/cache.Cache): Consul's
// "background refresh" agent caching, asked for with ?cached.
type Cache interface {
	Get(ctx context.Context, method string, args cache.Args, reply any, opts cache.Options) (cache.Result, error)
}

// cachedCall makes the read m(args) into out: from the agent cache when the
// request says ?cached, with Consul's X-Cache and Age headers, else from
// the servers. q is args' QueryOptions, already parsed.
func cachedCall[A any, R any, PA interface {
	*A
	cache.Args
}](s *Server, w http.ResponseWriter, r *http.Request, m structs.Method[A, R], args PA, out *R) error {
	if _, ok := r.URL.Query()["cached"]; !ok {
		return m.Call(r.Context(), s.rpc, args, out)
	}
	if args.QueryOpts().RequireConsistent {
		return badRequest("Cannot specify ?cached with ?consistent, conflicting semantics.")
	}
	if s.cache == nil {
		w.Header().Set("X-Cache", "MISS")
		return m.Call(r.Context(), s.rpc, args, out)
	}
	opts, err := parseCacheControl(r.Header.Values("Cache-Control"))
	if err != nil {
		return err
	}
	res, err := s.cache.Get(r.Context(), m.Name(), args, out, opts)
	if err != nil {
		return err
	}
	setCacheHeaders(w, res.Hit, res.Age)
	return nil
}

// setCacheHeaders says how an agent-cached answer was served, as Consul
// does: X-Cache HIT or MISS, and with a hit only, Age in whole seconds.
func setCacheHeaders(w http.ResponseWriter, hit bool, age time.Duration) {
	if !hit {
		w.Header().Set("X-Cache", "MISS")
		return
	}
	w.Header().Set("X-Cache", "HIT")
	w.Header().Set("Age", strconv.FormatInt(int64(age/time.Second), 10))
}

// parseCacheControl reads the directives Consul honours on a ?cached read:
// max-age and stale-if-error in seconds, and must-revalidate, which
// forbids the stale fallback. Others are ignored, as Consul does.
func parseCacheControl(values []string) (cache.Options, error) {
	var opts cache.Options
	mustRevalidate := false
	for _, v := range values {
		for _, d := range strings.Split(v, ",") {
			name, val, hasVal := strings.Cut(strings.TrimSpace(d), "=")
			name = strings.ToLower(name)
			var dst *time.Duration
			switch name {
			case "max-age":
				dst = &opts.MaxAge
			case "stale-if-error":
				dst = &opts.StaleIfError
			case "must-revalidate":
				mustRevalidate = true
				continue
			default:
				continue
			}
			n, err := strconv.ParseUint(strings.Trim(val, `"`), 10, 32)
			if !hasVal || err != nil {
				return cache.Options{}, badRequest("Invalid " + name + " in Cache-Control header")
			}
			*dst = time.Duration(n) * time.Second
		}
	}
	if mustRevalidate {
		opts.StaleIfError = 0
	}
	return opts, nil
}
