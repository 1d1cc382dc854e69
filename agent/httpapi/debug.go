package httpapi

import (
	"net/http"
	"net/http/pprof"
)

// debugRoutes serves Go's runtime profiles under /debug/pprof/ as Consul
// does when enable_debug is set: the index (and through it the named
// profiles: heap, goroutine, block, ...), the CPU profile, the execution
// trace, the command line and symbol lookup. Without enable_debug the
// paths are unknown and answer 404, as Consul's do without ACLs.
func debugRoutes(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}
