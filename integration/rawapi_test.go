package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawClient speaks Consul's HTTP API without the official client, so the
// scenarios see exact status codes, bodies and headers: "acknowledged" means
// a 200 with body `true`, nothing less.
type rawClient struct {
	http *http.Client
}

// requestTimeout bounds one request. During an election a write may wait for
// a leader; a request that times out counts as not acknowledged.
const requestTimeout = 5 * time.Second

func newRawClient(t *testing.T) *rawClient {
	return newTLSRawClient(t, nil)
}

// newTLSRawClient is newRawClient whose https:// addresses are dialled
// with tlsCfg (a CA and a client certificate).
func newTLSRawClient(t *testing.T, tlsCfg *tls.Config) *rawClient {
	tr := &http.Transport{MaxIdleConnsPerHost: 16, IdleConnTimeout: 30 * time.Second, TLSClientConfig: tlsCfg}
	t.Cleanup(tr.CloseIdleConnections)
	return &rawClient{http: &http.Client{Transport: tr}}
}

// response is one HTTP exchange, read in full.
type response struct {
	Status int
	Body   []byte
	Header http.Header
}

// consulIndex parses X-Consul-Index.
func (r response) consulIndex() (uint64, error) {
	v := r.Header.Get("X-Consul-Index")
	if v == "" {
		return 0, errors.New("no X-Consul-Index header")
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("X-Consul-Index %q: %w", v, err)
	}
	return n, nil
}

// readHeadersError checks the headers Consul puts on every read: an
// X-Consul-Index that is never 0 (on a 404 too), X-Consul-LastContact as
// integer milliseconds and X-Consul-KnownLeader true.
func (r response) readHeadersError() error {
	idx, err := r.consulIndex()
	if err != nil {
		return err
	}
	if idx == 0 {
		return errors.New("X-Consul-Index is 0")
	}
	lc := r.Header.Get("X-Consul-LastContact")
	if _, err := strconv.ParseUint(lc, 10, 64); err != nil {
		return fmt.Errorf("X-Consul-LastContact %q is not integer milliseconds", lc)
	}
	if kl := r.Header.Get("X-Consul-KnownLeader"); kl != "true" {
		return fmt.Errorf("X-Consul-KnownLeader %q, want true", kl)
	}
	return nil
}

func (c *rawClient) do(ctx context.Context, method, addr, pathQuery string, body []byte) (response, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.doNoTimeout(ctx, method, addr, pathQuery, body)
}

// doNoTimeout is do for blocking queries, whose own wait bounds them.
func (c *rawClient) doNoTimeout(ctx context.Context, method, addr, pathQuery string, body []byte) (response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	base := "http://" + addr
	if strings.HasPrefix(addr, "https://") {
		base = addr // an agent that serves HTTPS only
	}
	req, err := http.NewRequestWithContext(ctx, method, base+pathQuery, rd)
	if err != nil {
		return response{}, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return response{}, fmt.Errorf("%s %s%s: read body: %w", method, addr, pathQuery, err)
	}
	return response{Status: resp.StatusCode, Body: b, Header: resp.Header}, nil
}

// getJSON GETs and decodes a 200 answer, also returning the response.
func (c *rawClient) getJSON(ctx context.Context, addr, pathQuery string, out any) (response, error) {
	r, err := c.do(ctx, http.MethodGet, addr, pathQuery, nil)
	if err != nil {
		return r, err
	}
	if r.Status != http.StatusOK {
		return r, fmt.Errorf("GET %s%s: %d %q", addr, pathQuery, r.Status, r.Body)
	}
	if err := json.Unmarshal(r.Body, out); err != nil {
		return r, fmt.Errorf("GET %s%s: decode %q: %w", addr, pathQuery, r.Body, err)
	}
	return r, nil
}

// putTrue PUTs body and reports whether the answer was the acknowledged
// 200 `true`. Any other 200 body is a protocol error.
func (c *rawClient) putTrue(ctx context.Context, addr, pathQuery string, body []byte) error {
	r, err := c.do(ctx, http.MethodPut, addr, pathQuery, body)
	if err != nil {
		return err
	}
	if r.Status != http.StatusOK {
		return fmt.Errorf("PUT %s%s: %d %q", addr, pathQuery, r.Status, r.Body)
	}
	if got := strings.TrimSpace(string(r.Body)); got != "true" {
		return fmt.Errorf("%w: PUT %s%s answered 200 %q, want true", errProtocol, addr, pathQuery, got)
	}
	return nil
}

// errProtocol marks an answer that breaks Consul's contract (as opposed to
// an unavailable server), which retry loops must not swallow.
var errProtocol = errors.New("protocol violation")

// kvPath builds /v1/kv/<key> with the key's segments escaped.
func kvPath(key string, q url.Values) string {
	segs := strings.Split(key, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	p := "/v1/kv/" + strings.Join(segs, "/")
	if len(q) > 0 {
		p += "?" + encodeQuery(q)
	}
	return p
}

// encodeQuery encodes q, writing flag parameters with empty values (stale,
// consistent, recurse) bare, as Consul's clients do.
func encodeQuery(q url.Values) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		for _, v := range q[k] {
			if v == "" {
				parts = append(parts, url.QueryEscape(k))
			} else {
				parts = append(parts, url.QueryEscape(k)+"="+url.QueryEscape(v))
			}
		}
	}
	return strings.Join(parts, "&")
}

// readMode is a Consul consistency mode: "" (default), "stale" or
// "consistent".
type readMode string

const (
	modeDefault    readMode = ""
	modeStale      readMode = "stale"
	modeConsistent readMode = "consistent"
)

func (m readMode) String() string {
	if m == modeDefault {
		return "default"
	}
	return string(m)
}

// apply adds the mode's query parameter.
func (m readMode) apply(q url.Values) url.Values {
	if q == nil {
		q = url.Values{}
	}
	if m != modeDefault {
		q.Set(string(m), "")
	}
	return q
}

// kvEntry is one element of GET /v1/kv/<prefix>?recurse.
type kvEntry struct {
	Key         string
	Value       []byte // base64 in JSON; encoding/json decodes it
	Flags       uint64
	Session     string
	LockIndex   uint64
	CreateIndex uint64
	ModifyIndex uint64
}

// kvPut writes key=value and succeeds only on 200 `true`.
func (c *rawClient) kvPut(ctx context.Context, addr, key, value string) error {
	return c.putTrue(ctx, addr, kvPath(key, nil), []byte(value))
}

// kvList reads every key under prefix in the given mode and returns the
// values, the X-Consul-Index and the response (for header checks). A
// missing prefix (404) is an empty map, not an error.
func (c *rawClient) kvList(ctx context.Context, addr, prefix string, mode readMode) (map[string]string, uint64, response, error) {
	q := mode.apply(url.Values{"recurse": {""}})
	r, err := c.do(ctx, http.MethodGet, addr, kvPath(prefix, q), nil)
	if err != nil {
		return nil, 0, r, err
	}
	idx, ierr := r.consulIndex()
	out := map[string]string{}
	switch r.Status {
	case http.StatusNotFound:
	case http.StatusOK:
		var entries []kvEntry
		if err := json.Unmarshal(r.Body, &entries); err != nil {
			return nil, 0, r, fmt.Errorf("GET %s recurse %s: decode: %w", addr, prefix, err)
		}
		for _, e := range entries {
			out[e.Key] = string(e.Value)
		}
	default:
		return nil, 0, r, fmt.Errorf("GET %s recurse %s (%s): %d %q", addr, prefix, mode, r.Status, r.Body)
	}
	if ierr != nil {
		return nil, 0, r, fmt.Errorf("GET %s recurse %s: %w", addr, prefix, ierr)
	}
	return out, idx, r, nil
}

// waitForIndex blocks until a ?stale read of pathQuery on addr reports an
// X-Consul-Index of at least min: the server's local store has applied the
// Raft log up to there. It uses blocking queries (index=min-1, short wait),
// as a client catching up would, and tolerates servers that answer early.
func (c *rawClient) waitForIndex(ctx context.Context, addr, pathQuery string, min uint64) error {
	sep := "?"
	if strings.Contains(pathQuery, "?") {
		sep = "&"
	}
	last := uint64(0)
	for {
		q := fmt.Sprintf("%s%sstale&index=%d&wait=2s", pathQuery, sep, min-1)
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		r, err := c.doNoTimeout(rctx, http.MethodGet, addr, q, nil)
		cancel()
		if err == nil && (r.Status == http.StatusOK || r.Status == http.StatusNotFound) {
			idx, ierr := r.consulIndex()
			if ierr == nil && idx >= min {
				return nil
			}
			last = idx
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: stale %s stuck at index %d, want >= %d (last error %v): %w", addr, pathQuery, last, min, err, ctx.Err()) //nolint:errorlint // err may be nil here, which %v prints as <nil>
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// raftConfiguration is GET /v1/operator/raft/configuration.
type raftConfiguration struct {
	Servers []struct {
		ID      string
		Node    string
		Address string
		Leader  bool
		Voter   bool
	}
	Index uint64
}
