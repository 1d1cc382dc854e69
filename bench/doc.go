// Package bench is the load tool behind `trellis bench`: it measures any
// Consul-compatible target (Trellis or Consul) the same way, from outside,
// through Consul's HTTP API and Envoy's delta ADS over gRPC, and reads the
// target's RSS and CPU from /proc when given its PID.
//
// Each benchmark (Writes, KV, Blocking, XDS) takes a Target and Params and
// returns a Result: named figures, printed as a table and as one
// `RESULT {json}` line, plus the raw samples a report draws (the
// propagation delays of XDS). WriteReport turns results into the dated
// markdown report with an SVG chart that `make bench` writes.
//
// The simulated Envoys (Fleet) speak HTTP/2 gRPC directly, one goroutine
// per connection (ADSConn), so that the tool's own CPU per proxy stays
// close to a real Envoy's event loop and does not starve the target on a
// small machine.
package bench
