package workload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// attempt is what the balancer saw of one try of one request.
type attempt struct {
	endpoint string
	host     string
	status   int // 0 when no response arrived
	err      error
	// code and retryAfter come from a 5xx body and header.
	code       string
	retryAfter string
}

// callInfo travels in a request's context so that the caller learns how
// many times the balancer had to try, and which replica answered last.
type callInfo struct {
	retries int
	host    string
}

type callInfoKey struct{}

func withCallInfo(ctx context.Context) (context.Context, *callInfo) {
	ci := &callInfo{}
	return context.WithValue(ctx, callInfoKey{}, ci), ci
}

// balancer is an http.RoundTripper that behaves like a load balancer in
// front of the replicas: the client picks a replica round-robin, and a try
// that fails with a transport error or a 503 is sent again to the next
// replica, a bounded number of times. Retrying a write that may already
// have run is exactly what a real balancer does, so the relay must cope.
type balancer struct {
	hosts          []string
	inner          *http.Transport
	attempts       int
	attemptTimeout time.Duration
	observe        func(attempt)
}

func newBalancer(baseURLs []string, attempts int, attemptTimeout time.Duration, observe func(attempt)) (*balancer, error) {
	b := &balancer{attempts: attempts, attemptTimeout: attemptTimeout, observe: observe}
	for _, base := range baseURLs {
		u, err := url.Parse(base)
		if err != nil || u.Host == "" {
			return nil, fmt.Errorf("workload: base URL %q: not an absolute URL", base)
		}
		b.hosts = append(b.hosts, u.Host)
	}
	if len(b.hosts) == 0 {
		return nil, errors.New("workload: no base URL")
	}
	b.inner = &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        4096,
		MaxIdleConnsPerHost: 1024,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	return b, nil
}

// close drops idle connections.
func (b *balancer) close() { b.inner.CloseIdleConnections() }

func (b *balancer) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	ci, _ := ctx.Value(callInfoKey{}).(*callInfo)
	endpoint := endpointOf(req.URL.Path)
	first := 0
	for i, h := range b.hosts {
		if h == req.URL.Host {
			first = i
			break
		}
	}
	for n := 0; ; n++ {
		host := b.hosts[(first+n)%len(b.hosts)]
		actx, cancel := context.WithTimeout(ctx, b.attemptTimeout)
		r := req.Clone(actx)
		r.URL.Host, r.Host = host, host
		if n > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				cancel()
				return nil, fmt.Errorf("rewind request body: %w", err)
			}
			r.Body = body
		}
		resp, err := b.inner.RoundTrip(r)
		a := attempt{endpoint: endpoint, host: host, err: err}
		if ci != nil {
			ci.host = host
		}
		if resp != nil {
			a.status = resp.StatusCode
		}
		retry := err != nil || resp.StatusCode == http.StatusServiceUnavailable
		if resp != nil && resp.StatusCode >= 500 {
			// Read the refusal so it can be judged, then hand the caller
			// the same bytes.
			data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			var body struct {
				Error string `json:"error"`
			}
			_ = json.Unmarshal(data, &body)
			a.code, a.retryAfter = body.Error, resp.Header.Get("Retry-After")
			resp.Body = io.NopCloser(strings.NewReader(string(data)))
		}
		// A try cut short because the caller gave up is not the relay's doing.
		if b.observe != nil && (err == nil || ctx.Err() == nil) {
			b.observe(a)
		}
		last := n+1 >= b.attempts || ctx.Err() != nil
		if !retry || last {
			if resp == nil {
				cancel()
				return nil, err
			}
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
			return resp, nil
		}
		if resp != nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		cancel()
		if ci != nil {
			ci.retries++
		}
		if err == nil {
			// A 503 means the replica is up but its store is not; pause a
			// little before the next one rather than spin.
			t := time.NewTimer(time.Duration(n+1) * 10 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
			case <-t.C:
			}
		}
	}
}

// cancelOnClose ends an attempt's context once its body has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// endpointOf names a request path's endpoint: "site/<name>" on the site
// plane, the last segment on the daemon plane.
func endpointOf(path string) string {
	if name, ok := strings.CutPrefix(path, "/relay/site/"); ok {
		return "site/" + name
	}
	if i := strings.LastIndexByte(path, '/'); i >= 0 {
		return path[i+1:]
	}
	return path
}
