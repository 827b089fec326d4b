package peer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/protocol"
)

// Defaults used when a Config leaves a field zero.
const (
	DefaultBasePath     = "/byollm"
	DefaultPollInterval = 50 * time.Millisecond
	// DefaultFetchWait matches the relay's awaiting-payload window: past it
	// the relay requeues the job, so waiting longer cannot help.
	DefaultFetchWait   = protocol.AwaitingPayloadMs * time.Millisecond
	defaultHTTPTimeout = 30 * time.Second
	// maxResponseBytes bounds how much of a response body is read, so a
	// misbehaving server cannot exhaust a test process.
	maxResponseBytes = 64 << 20
)

// Config says how a Daemon or Site reaches its relay.
type Config struct {
	// BaseURLs are the relay's origins ("http://127.0.0.1:8080"), without
	// the daemon base path. With more than one, successive requests go to
	// successive URLs round-robin, as a load balancer in front of several
	// replicas would spread them. At least one is required.
	BaseURLs []string
	// BasePath is the daemon plane's path prefix; "" means DefaultBasePath
	// and "/" means the root. Trailing slashes are dropped, as the relay
	// drops them from its own setting. The site plane ignores it.
	BasePath string
	// HTTPClient sends the requests; nil means a client with a 30 s timeout.
	HTTPClient *http.Client
	// Clock stamps x-byollm-issued-at; nil means the system clock. Give a
	// skewed clock to provoke clock-skew refusals.
	Clock clock.Clock
	// PollInterval is the pause between polls in Work (and so RunOnce) and
	// the Site's Await helpers; zero means DefaultPollInterval.
	PollInterval time.Duration
	// FetchWait bounds how long Work polls fetch while the payload is not
	// ready, unless its Steps say otherwise; zero means DefaultFetchWait.
	// Daemon only.
	FetchWait time.Duration
	// Kinds are the job kinds RunOnce claims and Heartbeat advertises; nil
	// means both llm.generate and llm.chat. Daemon only.
	Kinds []string
}

// Transport sends requests to one relay, or to several replicas of it
// round-robin. Daemon and Site embed it; it is safe for concurrent use.
type Transport struct {
	bases []string
	next  atomic.Uint64
	http  *http.Client
	clock clock.Clock
}

// NewTransport checks cfg and builds a Transport from it.
func NewTransport(cfg Config) (*Transport, error) {
	if len(cfg.BaseURLs) == 0 {
		return nil, errors.New("client config: no base URL")
	}
	bases := make([]string, len(cfg.BaseURLs))
	for i, b := range cfg.BaseURLs {
		b = strings.TrimRight(b, "/")
		if !strings.HasPrefix(b, "http://") && !strings.HasPrefix(b, "https://") {
			return nil, fmt.Errorf("client config: base URL %q is not http(s)", cfg.BaseURLs[i])
		}
		bases[i] = b
	}
	t := &Transport{bases: bases, http: cfg.HTTPClient, clock: cfg.Clock}
	if t.http == nil {
		t.http = &http.Client{Timeout: defaultHTTPTimeout}
	}
	if t.clock == nil {
		t.clock = clock.System{}
	}
	return t, nil
}

// BaseURLs returns the relay origins this transport rotates through.
func (t *Transport) BaseURLs() []string { return append([]string(nil), t.bases...) }

// NextBase returns the origin the next request goes to and advances the
// rotation.
func (t *Transport) NextBase() string {
	n := t.next.Add(1) - 1
	return t.bases[n%uint64(len(t.bases))]
}

// IssuedAt is the x-byollm-issued-at value a request signed now would carry.
func (t *Transport) IssuedAt() int64 { return clock.UnixMilli(t.clock) }

// RawRequest is a request sent as given: nothing is signed, encoded or
// checked, so tests can send whatever a hostile or broken peer might.
type RawRequest struct {
	Method string
	// BaseURL pins the request to one origin; "" takes the next one in the
	// rotation.
	BaseURL string
	// Path is appended to the origin verbatim, query included, so escapes
	// such as "/byollm/cl%61im" reach the server as written.
	Path   string
	Header http.Header
	Body   []byte
}

// RawResponse is a response as received.
type RawResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// Raw sends req and returns the response whatever its status. An error means
// no response was received.
func (t *Transport) Raw(ctx context.Context, req RawRequest) (RawResponse, error) {
	base := req.BaseURL
	if base == "" {
		base = t.NextBase()
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, method, base+req.Path, body)
	if err != nil {
		return RawResponse{}, fmt.Errorf("build %s %s: %w", method, req.Path, err)
	}
	for name, vals := range req.Header {
		for _, v := range vals {
			hr.Header.Add(name, v)
		}
	}
	resp, err := t.http.Do(hr)
	if err != nil {
		return RawResponse{}, fmt.Errorf("%s %s: %w", method, req.Path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return RawResponse{}, fmt.Errorf("%s %s: read response: %w", method, req.Path, err)
	}
	if len(data) > maxResponseBytes {
		return RawResponse{}, fmt.Errorf("%s %s: response larger than %d bytes", method, req.Path, maxResponseBytes)
	}
	return RawResponse{Status: resp.StatusCode, Header: resp.Header, Body: data}, nil
}

// call sends req and decodes a 2xx body into out; anything else becomes an
// *Error. strict refuses unknown response fields, for the daemon plane whose
// upstream client parses strictly (relay-behaviour.md RB-A17).
func (t *Transport) call(ctx context.Context, endpoint string, req RawRequest, out any, strict bool) error {
	return t.callDecode(ctx, endpoint, req, func(body []byte) error {
		if strict {
			return strictUnmarshal(body, out)
		}
		return json.Unmarshal(body, out)
	})
}

// callDecode sends req and hands a 2xx body to decode; anything else becomes
// an *Error. Protocol "2" peers decode with protocol/proto2's strict
// readers, as the published clients parse their answers.
func (t *Transport) callDecode(ctx context.Context, endpoint string, req RawRequest, decode func([]byte) error) error {
	resp, err := t.Raw(ctx, req)
	if err != nil {
		return fmt.Errorf("%s: %w", endpoint, err)
	}
	if resp.Status < 200 || resp.Status > 299 {
		return newError(endpoint, resp)
	}
	if err := decode(resp.Body); err != nil {
		return &DecodeError{Endpoint: endpoint, Status: resp.Status, Body: resp.Body, Err: err}
	}
	return nil
}

// DecodeError is a 2xx answer the peer could not read: for a "2" daemon,
// one the published daemon's strict parse would refuse too.
type DecodeError struct {
	Endpoint string
	Status   int
	Body     []byte
	Err      error
}

func (e *DecodeError) Error() string {
	return fmt.Sprintf("%s: decode %d response %q: %v", e.Endpoint, e.Status, truncate(e.Body), e.Err)
}

func (e *DecodeError) Unwrap() error { return e.Err }

// Error is a relay refusal: any response outside 2xx.
type Error struct {
	// Endpoint is the endpoint the request was for ("claim", "site/enqueue").
	Endpoint string
	Status   int
	// Body is the decoded refusal; zero if the body was not a JSON object.
	Body protocol.ErrorBody
	// Raw is the body as received.
	Raw []byte
}

func newError(endpoint string, resp RawResponse) *Error {
	e := &Error{Endpoint: endpoint, Status: resp.Status, Raw: resp.Body}
	// A body that does not decode leaves Body zero; Raw still has it.
	_ = json.Unmarshal(resp.Body, &e.Body)
	return e
}

// Error describes the refusal: endpoint, status, code and message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Endpoint)
	b.WriteString(": relay answered ")
	b.WriteString(strconv.Itoa(e.Status))
	switch {
	case e.Body.Error != "":
		b.WriteString(" ")
		b.WriteString(string(e.Body.Error))
		if e.Body.Message != "" {
			b.WriteString(": ")
			b.WriteString(e.Body.Message)
		}
	case len(e.Raw) > 0:
		b.WriteString(" ")
		b.WriteString(strconv.Quote(truncate(e.Raw)))
	}
	return b.String()
}

// ErrorCode returns the wire error code of a relay refusal anywhere in err's
// chain, or "" when err is not one.
func ErrorCode(err error) protocol.Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Body.Error
	}
	return ""
}

// ErrorStatus returns the HTTP status of a relay refusal anywhere in err's
// chain, or 0 when err is not one.
func ErrorStatus(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

// truncate shortens a body for an error message.
func truncate(b []byte) string {
	const limit = 200
	if len(b) > limit {
		return string(b[:limit]) + "…"
	}
	return string(b)
}

// jsonHeader returns a header set for a JSON request body.
func jsonHeader() http.Header {
	h := make(http.Header)
	h.Set("Content-Type", "application/json")
	return h
}
