package checks

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/trellis-mesh/trellis/structs"
)

// HTTPCheckConfig configures an HTTP check.
type HTTPCheckConfig struct {
	CheckID string
	// URL is the target; Method defaults to GET. Header and Body are sent
	// with every request (a "Host" header sets the request's Host).
	URL    string
	Method string
	Header map[string][]string
	Body   string
	// Interval between probes (the Manager has already applied
	// MinInterval); Timeout bounds one probe (default 10s).
	Interval time.Duration
	Timeout  time.Duration
	// TLSConfig is used for https targets (nil: Go's defaults).
	TLSConfig *tls.Config
	// OutputMaxSize caps the response body kept in the output (default
	// 4 KiB; the end of the body is kept).
	OutputMaxSize int
	// Notifier receives results, normally through a StatusHandler.
	Notifier Notifier
	Logger   *slog.Logger
}

// HTTPCheck probes a URL periodically: 2xx is passing, 429 (Too Many
// Requests) warning, any other status or a transport error critical. The
// output is Consul's "HTTP GET <url>: 200 OK Output: <body>". Redirects are
// followed (up to Go's limit of 10), as Consul does by default.
type HTTPCheck struct {
	periodic
	url       string
	method    string
	header    http.Header
	body      string
	maxOut    int
	transport *http.Transport
	client    *http.Client
}

// NewHTTPCheck builds an HTTP check; Start begins probing.
func NewHTTPCheck(cfg HTTPCheckConfig) *HTTPCheck {
	method := cfg.Method
	if method == "" {
		method = http.MethodGet
	}
	maxOut := cfg.OutputMaxSize
	if maxOut < 1 {
		maxOut = DefaultOutputMaxSize
	}
	// Keep-alives are off, as in Consul: a probe must open a fresh
	// connection, or a dead listener would hide behind a pooled one.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DisableKeepAlives = true
	tr.TLSClientConfig = cfg.TLSConfig
	c := &HTTPCheck{
		url:       cfg.URL,
		method:    method,
		header:    http.Header(cfg.Header).Clone(),
		body:      cfg.Body,
		maxOut:    maxOut,
		transport: tr,
		client:    &http.Client{Transport: tr, Timeout: positiveOr(cfg.Timeout, DefaultTimeout)},
	}
	c.periodic = periodic{
		checkID:  cfg.CheckID,
		interval: cfg.Interval,
		notify:   cfg.Notifier,
		logger:   orDiscard(cfg.Logger),
		probe:    c.probeOnce,
	}
	return c
}

// Start begins probing after a random stagger within one interval.
func (c *HTTPCheck) Start() { c.lc.start(c.run) }

// Stop aborts any probe in flight and waits for the check's goroutine.
func (c *HTTPCheck) Stop() {
	c.lc.stop()
	c.transport.CloseIdleConnections()
}

func (c *HTTPCheck) probeOnce(ctx context.Context) (string, string) {
	req, err := http.NewRequestWithContext(ctx, c.method, c.url, strings.NewReader(c.body))
	if err != nil {
		return structs.HealthCritical, err.Error()
	}
	req.Header = c.header.Clone()
	if req.Header == nil {
		req.Header = make(http.Header)
	}
	if host := req.Header.Get("Host"); host != "" {
		req.Host = host
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", UserAgent)
	}
	if req.Header.Get("Accept") == "" {
		req.Header.Set("Accept", "text/plain, text/*, */*")
	}

	resp, err := c.client.Do(req)
	if err != nil {
		return structs.HealthCritical, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()

	out := newTailBuffer(c.maxOut)
	if _, err := io.Copy(out, resp.Body); err != nil {
		c.logger.Warn("check error while reading body", "check", c.checkID, "error", err)
	}
	result := fmt.Sprintf("HTTP %s %s: %s Output: %s", c.method, c.url, resp.Status, out.String())

	switch {
	case resp.StatusCode >= 200 && resp.StatusCode <= 299:
		return structs.HealthPassing, result
	case resp.StatusCode == http.StatusTooManyRequests:
		return structs.HealthWarning, result
	default:
		return structs.HealthCritical, result
	}
}
