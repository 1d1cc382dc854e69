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

// newHTTPClient returns a client without keep-alives: status polling talks to
// processes that get killed, and idle connections would outlive the test as
// goroutines.
func newHTTPClient() *http.Client {
	return &http.Client{
		Timeout:   statusTimeout,
		Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil},
	}
}

// GetJSON GETs http://<httpAddr><path> and decodes a 200 answer into out.
// Other statuses give an error wrapping ErrHTTPStatus with the body.
func GetJSON(ctx context.Context, httpAddr, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+httpAddr+path, nil)
	if err != nil {
		return fmt.Errorf("harness: GET %s%s: %w", httpAddr, path, err)
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return fmt.Errorf("harness: GET %s%s: %w", httpAddr, path, err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("harness: GET %s%s: read body: %w", httpAddr, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%w: GET %s%s: %d %q", ErrHTTPStatus, httpAddr, path, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("harness: GET %s%s: decode %q: %w", httpAddr, path, body, err)
	}
	return nil
}

// StatusLeader returns what GET /v1/status/leader on httpAddr answers: the
// leader's Raft address ("127.0.0.1:<server-port>"), or "" when the agent
// knows no leader.
func StatusLeader(ctx context.Context, httpAddr string) (string, error) {
	var leader string
	if err := GetJSON(ctx, httpAddr, "/v1/status/leader", &leader); err != nil {
		return "", err
	}
	return leader, nil
}

// StatusPeers returns GET /v1/status/peers on httpAddr: the Raft addresses of
// the voters.
func StatusPeers(ctx context.Context, httpAddr string) ([]string, error) {
	var peers []string
	if err := GetJSON(ctx, httpAddr, "/v1/status/peers", &peers); err != nil {
		return nil, err
	}
	return peers, nil
}
