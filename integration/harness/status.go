package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"
)

// statusTimeout bounds one status request, so a hung server cannot stall a
// polling loop beyond its context by much.
const statusTimeout = 5 * time.Second

// endpoint is where and how to reach one agent's HTTP API.
type endpoint struct {
	// base is "http://host:port" or "https://host:port".
	base  string
	https *HTTPSConfig
}

// getJSON GETs base+path and decodes a 200 answer into out. Other statuses
// give an error wrapping ErrHTTPStatus with the body.
func (e endpoint) getJSON(ctx context.Context, path string, out any) error {
	url := e.base + path
	hc, err := newHTTPClient(e.https)
	if err != nil {
		return fmt.Errorf("harness: GET %s: %w", url, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("harness: GET %s: %w", url, err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("harness: GET %s: %w", url, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("harness: GET %s: read body: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s: %d %q", ErrHTTPStatus, url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("harness: GET %s: decode %q: %w", url, body, err)
	}
	return nil
}

func (e endpoint) statusLeader(ctx context.Context) (string, error) {
	var leader string
	if err := e.getJSON(ctx, "/v1/status/leader", &leader); err != nil {
		return "", err
	}
	return leader, nil
}

func (e endpoint) statusPeers(ctx context.Context) ([]string, error) {
	var peers []string
	if err := e.getJSON(ctx, "/v1/status/peers", &peers); err != nil {
		return nil, err
	}
	return peers, nil
}

// plain is the plaintext endpoint at httpAddr.
func plain(httpAddr string) endpoint { return endpoint{base: "http://" + httpAddr} }

// GetJSON GETs http://<httpAddr><path> and decodes a 200 answer into out.
// Other statuses give an error wrapping ErrHTTPStatus with the body. For an
// agent that may serve HTTPS, use Agent.GetJSON.
func GetJSON(ctx context.Context, httpAddr, path string, out any) error {
	return plain(httpAddr).getJSON(ctx, path, out)
}

// StatusLeader returns what GET /v1/status/leader on plaintext httpAddr
// answers: the leader's Raft address ("127.0.0.1:<server-port>"), or "" when
// the agent knows no leader. Agent.StatusLeader also speaks HTTPS.
func StatusLeader(ctx context.Context, httpAddr string) (string, error) {
	return plain(httpAddr).statusLeader(ctx)
}

// StatusPeers returns GET /v1/status/peers on httpAddr: the Raft addresses of
// the voters.
func StatusPeers(ctx context.Context, httpAddr string) ([]string, error) {
	return plain(httpAddr).statusPeers(ctx)
}
