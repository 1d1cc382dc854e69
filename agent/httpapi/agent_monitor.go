package httpapi

import (
	"errors"
	"fmt"
	"net/http"
)

// ErrUnknownLogLevel is what a Monitor returns for a level name it does not
// know; /v1/agent/monitor answers it with 400, as Consul does.
var ErrUnknownLogLevel = errors.New("unknown log level")

// Monitor streams the agent's own log lines for /v1/agent/monitor.
type Monitor interface {
	// Subscribe returns the lines logged at level (Consul's names: trace,
	// debug, info, warn, error) and above, as JSON lines when json is
	// set; the channel closes when cancel is called or the agent stops.
	Subscribe(level string, json bool) (lines <-chan []byte, cancel func(), err error)
}

// agentMonitor handles GET /v1/agent/monitor: the agent's logs as they are
// written, at ?loglevel (default info), as JSON lines with ?logjson, until
// the client goes away or the agent stops.
func (s *Server) agentMonitor(w http.ResponseWriter, r *http.Request) (any, error) {
	if s.monitor == nil {
		return nil, errNotServed
	}
	q := r.URL.Query()
	level := q.Get("loglevel")
	if level == "" {
		level = "info"
	}
	_, logJSON := q["logjson"]
	lines, cancel, err := s.monitor.Subscribe(level, logJSON)
	if errors.Is(err, ErrUnknownLogLevel) {
		return nil, &StatusError{Code: http.StatusBadRequest, Msg: fmt.Sprintf("Unknown log level: %s", level)}
	}
	if err != nil {
		return nil, &StatusError{Code: http.StatusServiceUnavailable, Msg: err.Error()}
	}
	defer cancel()
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return nil, nil
		case line, ok := <-lines:
			if !ok {
				return nil, nil
			}
			if _, err := w.Write(line); err != nil {
				return nil, nil
			}
			if flusher != nil {
				flusher.Flush()
			}
		}
	}
}
