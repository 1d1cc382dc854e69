package agent

import (
	"fmt"
	"log/slog"

	"github.com/trellis-mesh/trellis/agent/config"
	"github.com/trellis-mesh/trellis/agent/httpapi"
	"github.com/trellis-mesh/trellis/agent/logmonitor"
)

// newLogHub returns the hub that copies the agent's logs to
// /v1/agent/monitor, naming levels below debug TRACE as the agent's own
// output does.
func newLogHub() *logmonitor.Hub {
	return logmonitor.New(logmonitor.Config{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if a.Key == slog.LevelKey && len(groups) == 0 {
				if lv, ok := a.Value.Any().(slog.Level); ok && lv <= config.LevelTrace {
					a.Value = slog.StringValue("TRACE")
				}
			}
			return a
		},
	})
}

// logMonitor serves httpapi.Monitor from the agent's hub.
type logMonitor struct{ hub *logmonitor.Hub }

func (m logMonitor) Subscribe(level string, json bool) (<-chan []byte, func(), error) {
	lv, err := config.ParseLogLevel(level)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", httpapi.ErrUnknownLogLevel, err)
	}
	return m.hub.Subscribe(lv, json)
}
