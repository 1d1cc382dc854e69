package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/hashicorp/consul/api"
)

// DefaultHTTPAddr is where client commands find the agent unless
// -http-addr or CONSUL_HTTP_ADDR says otherwise.
const DefaultHTTPAddr = "127.0.0.1:8500"

// StatusError is a non-2xx answer from the agent. Its message matches the
// official Consul client's ("Unexpected response code: 500 (body)") so that
// scripts matching Consul's CLI errors keep working.
type StatusError struct {
	Code int
	Body string
}

func (e *StatusError) Error() string {
	if e.Body == "" {
		return fmt.Sprintf("Unexpected response code: %d", e.Code)
	}
	return fmt.Sprintf("Unexpected response code: %d (%s)", e.Code, e.Body)
}

// isNotFound reports whether err is a 404 from the agent.
func isNotFound(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code == http.StatusNotFound
}

// apiClient is a small client for Consul's HTTP API built on net/http, so
// that each command's requests are exactly the ones Consul's CLI sends.
// Only lock uses the official consul/api client, for its lock and
// semaphore algorithms, over this client's transport.
type apiClient struct {
	base  url.URL // scheme and host
	http  *http.Client
	token string
	// dc and stale are added to requests that take them (reads and KV
	// writes), as the official client does from its config.
	dc    string
	stale bool
}

// clientConfig is what the HTTP flags and environment resolve to.
type clientConfig struct {
	addr      string // host:port, http(s)://host:port or unix:///path
	token     string
	ssl       bool
	sslVerify bool
	dc        string
	stale     bool
	// tls is the HTTPS client side: CA, client certificate, server name.
	tls api.TLSConfig
}

func newAPIClient(cfg clientConfig) (*apiClient, error) {
	addr := strings.TrimSpace(cfg.addr)
	if addr == "" {
		addr = DefaultHTTPAddr
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	c := &apiClient{http: &http.Client{Transport: transport}, token: cfg.token, dc: cfg.dc, stale: cfg.stale}
	switch {
	case strings.HasPrefix(addr, "unix://"):
		path := strings.TrimPrefix(addr, "unix://")
		if path == "" {
			return nil, fmt.Errorf("invalid HTTP address %q: empty socket path", addr)
		}
		transport.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}
		c.base = url.URL{Scheme: "http", Host: "unix"}
	case strings.Contains(addr, "://"):
		u, err := url.Parse(addr)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("invalid HTTP address %q: want host:port, http://host:port, https://host:port or unix:///path", addr)
		}
		c.base = url.URL{Scheme: u.Scheme, Host: u.Host}
	default:
		scheme := "http"
		if cfg.ssl {
			scheme = "https"
		}
		c.base = url.URL{Scheme: scheme, Host: addr}
	}
	if c.base.Scheme == "https" {
		t := cfg.tls
		// CONSUL_HTTP_SSL_VERIFY=false asks for no verification.
		t.InsecureSkipVerify = !cfg.sslVerify
		if t.Address == "" {
			// The name checked is the dialled host unless
			// -tls-server-name says otherwise, as in Consul's client.
			t.Address = c.base.Host
		}
		tc, err := api.SetupTLSConfig(&t)
		if err != nil {
			return nil, fmt.Errorf("TLS configuration: %w", err)
		}
		transport.TLSClientConfig = tc
	}
	return c, nil
}

// request describes one call.
type request struct {
	method string
	path   string // already unescaped, e.g. "/v1/kv/a b"
	query  url.Values
	body   io.Reader
	// contentType defaults to application/json when body is set.
	contentType string
	// withDC adds ?dc= and ?stale from the flags.
	withDC bool
}

// do sends r and returns the body of a 2xx answer; other answers become a
// *StatusError.
func (c *apiClient) do(ctx context.Context, r request) ([]byte, http.Header, error) {
	resp, err := c.open(ctx, r)
	if err != nil {
		var se *StatusError
		if errors.As(err, &se) && resp != nil {
			return nil, resp.Header, err
		}
		return nil, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, fmt.Errorf("reading response: %w", err)
	}
	return body, resp.Header, nil
}

// open sends r and returns a 2xx answer with its body still to read (the
// caller closes it), for streams such as /v1/agent/monitor. Other answers
// become a *StatusError, returned with the (closed) response.
func (c *apiClient) open(ctx context.Context, r request) (*http.Response, error) {
	q := url.Values{}
	for k, v := range r.query {
		q[k] = v
	}
	if r.withDC {
		if c.dc != "" {
			q.Set("dc", c.dc)
		}
		if c.stale && r.method == http.MethodGet {
			q.Set("stale", "")
		}
	}
	u := c.base
	u.Path = r.path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, r.method, u.String(), r.body)
	if err != nil {
		return nil, err
	}
	if r.body != nil {
		ct := r.contentType
		if ct == "" {
			ct = "application/json"
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.token != "" {
		req.Header.Set("X-Consul-Token", c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("reading response: %w", err)
		}
		return resp, &StatusError{Code: resp.StatusCode, Body: strings.TrimSpace(string(body))}
	}
	return resp, nil
}

// getJSON GETs path and decodes the JSON answer into out.
func (c *apiClient) getJSON(ctx context.Context, path string, query url.Values, withDC bool, out any) error {
	body, _, err := c.do(ctx, request{method: http.MethodGet, path: path, query: query, withDC: withDC})
	if err != nil {
		return err
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("decoding response of %s: %w", path, err)
	}
	return nil
}

// put sends a PUT with an optional JSON body and returns the raw answer.
func (c *apiClient) put(ctx context.Context, path string, query url.Values, jsonBody any) ([]byte, error) {
	r := request{method: http.MethodPut, path: path, query: query}
	if jsonBody != nil {
		b, err := json.Marshal(jsonBody)
		if err != nil {
			return nil, err
		}
		r.body = bytes.NewReader(b)
	}
	body, _, err := c.do(ctx, r)
	return body, err
}

// readToken reads a token file (-token-file, CONSUL_HTTP_TOKEN_FILE).
func readToken(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("reading token file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}
