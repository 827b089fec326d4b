package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
)

// The bounds of one external author call (G-R35): the default, and the
// most that stays well inside the 10 s sealing window.
const (
	DefaultAuthorTimeout = 2 * time.Second
	MaxAuthorTimeout     = 5 * time.Second
)

// maxAuthorAnswer bounds what relayd reads of an author's answer; a grant
// is a few hundred bytes.
const maxAuthorAnswer = 64 << 10

// The window an external grant's issuedAt must fall in, around the relay
// clock (G-R37): no older than the daemon would still take with room for
// the round trip, and no further ahead than a small skew.
const (
	authorIssuedBehind = 60 * time.Second
	authorIssuedAhead  = 5 * time.Second
)

// Token is the bearer token relayd sends an external author. It prints
// and logs as "[redacted]", so that no log line can carry it.
type Token string

func (Token) String() string                 { return "[redacted]" }
func (t Token) GoString() string             { return t.String() }
func (t Token) Format(f fmt.State, _ rune)   { _, _ = f.Write([]byte(t.String())) }
func (t Token) LogValue() slog.Value         { return slog.StringValue(t.String()) }
func (t Token) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// LoadToken reads a bearer token file: its content, surrounding white
// space trimmed. Errors name the path and never quote the file.
func LoadToken(path string) (Token, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("admission: grant author token file %s: %w", path, err)
	}
	t := strings.TrimSpace(string(data))
	switch {
	case t == "":
		return "", fmt.Errorf("admission: grant author token file %s is empty", path)
	case strings.ContainsAny(t, "\r\n"):
		return "", fmt.Errorf("admission: grant author token file %s holds more than one line", path)
	}
	return Token(t), nil
}

// ExternalOptions configures an External author.
type ExternalOptions struct {
	// URL is where the author is POSTed to.
	URL string
	// Keys are the public keys the author signs with, the first current
	// (unpadded base64url, as devices pin them).
	Keys []string
	// Timeout bounds one call: DefaultAuthorTimeout when zero.
	Timeout time.Duration
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token Token
	// Client makes the calls: one that follows no redirect when nil, so
	// that the token only ever goes to URL.
	Client *http.Client
	// Now is the relay clock an answer's issuedAt is checked against when
	// it arrives; when nil, the now the claim is authored at.
	Now func() time.Time
	// Logger hears every failure and every refused grant, never a grant,
	// a signature or the token.
	Logger *slog.Logger
}

// External is a grant author outside relayd (spec grants.md §7): the
// reference control plane's GrantAuthor contract over HTTP (G-R36). What it
// answers is checked as the device will check it (G-R37), and every failure
// is a transient decline (G-R38). It is safe for concurrent use.
type External struct {
	url     string
	keys    []string
	byKey   map[string]bool
	timeout time.Duration
	token   Token
	client  *http.Client
	now     func() time.Time
	logger  *slog.Logger
}

// NewExternal checks o and builds the author.
func NewExternal(o ExternalOptions) (*External, error) {
	if _, err := url.Parse(o.URL); err != nil || o.URL == "" {
		return nil, errors.New("admission: the grant author needs an absolute URL")
	}
	if len(o.Keys) == 0 {
		return nil, errors.New("admission: the grant author needs at least one public key")
	}
	e := &External{url: o.URL, byKey: map[string]bool{}, timeout: o.Timeout, token: o.Token, client: o.Client, now: o.Now, logger: o.Logger}
	for i, k := range o.Keys {
		if _, err := projection.ParseGrantKey(k); err != nil {
			return nil, fmt.Errorf("admission: grant author key %d: %w", i+1, err)
		}
		if e.byKey[k] {
			return nil, fmt.Errorf("admission: grant author key %d is listed twice", i+1)
		}
		e.byKey[k] = true
		e.keys = append(e.keys, k)
	}
	if e.timeout <= 0 {
		e.timeout = DefaultAuthorTimeout
	}
	if e.client == nil {
		e.client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return e, nil
}

// Holds reports whether publicKey is one of the author's keys.
func (e *External) Holds(publicKey string) bool { return e.byKey[publicKey] }

// AuthorKeys lists the author's keys, current first.
func (e *External) AuthorKeys() []KeyInfo {
	out := make([]KeyInfo, 0, len(e.keys))
	for _, k := range e.keys {
		out = append(out, keyInfo(k, SignerExternal))
	}
	return out
}

// Host is the author's host, for the boot log.
func (e *External) Host() string {
	u, err := url.Parse(e.url)
	if err != nil {
		return ""
	}
	return u.Host
}

// authorInput is the reference GrantAuthor input (G-R3, G-R36), its keys
// in the reference's order. Purpose is omitted when the stub has none: the
// engine defaults only a missing purpose, never "".
type authorInput struct {
	Job          proto2.ClaimedStub  `json:"job"`
	SiteID       string              `json:"siteId"`
	SiteKey      string              `json:"siteKey"`
	Purpose      string              `json:"purpose,omitempty"`
	Owner        string              `json:"owner"`
	RunnerID     string              `json:"runnerId"`
	Capabilities []proto2.Capability `json:"capabilities"`
}

// Author asks the external author about c. A stub whose site key names no
// current site is declined unknown-site without asking (G-R4). The
// answer's issuedAt is checked against the relay clock (Now) when it
// arrives, or against now.
func (e *External) Author(ctx context.Context, p *projection.Projection, c Claim, grantKey projection.GrantKey, now time.Time) Outcome {
	siteID, ok := p.SiteIDForKey(c.Stub.Site)
	if !ok {
		return Outcome{Decision: declined(ReasonUnknownSite)}
	}
	body, err := RequestBody(c, siteID)
	if err != nil {
		return e.unavailable(ctx, c, "encode the request", err)
	}
	answer, err := e.call(ctx, body)
	if err != nil {
		return e.unavailable(ctx, c, "call", err)
	}
	if e.now != nil {
		now = e.now()
	}
	return e.decide(ctx, c, grantKey, answer, now)
}

// RequestBody is the exact body relayd POSTs for c (G-R36), siteID being
// the control-plane id of the stub's site key.
func RequestBody(c Claim, siteID string) ([]byte, error) {
	caps := c.Capabilities
	if caps == nil {
		caps = []proto2.Capability{}
	}
	in := authorInput{
		Job:    proto2.ClaimedStub{JobStub: c.Stub, Lease: c.Lease},
		SiteID: siteID, SiteKey: c.Stub.Site, Purpose: c.Stub.Purpose,
		Owner: c.DeviceOwner, RunnerID: c.RunnerID, Capabilities: caps,
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // JSON.stringify's bytes: < > & travel raw
	if err := enc.Encode(in); err != nil {
		return nil, fmt.Errorf("admission: encode the grant author input: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// call POSTs body within the timeout and returns a 200 answer's body.
func (e *External) call(ctx context.Context, body []byte) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build the request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	if e.token != "" {
		req.Header.Set("Authorization", "Bearer "+string(e.token))
	}
	resp, err := e.client.Do(req)
	if err != nil {
		// The URL is the operator's, and said at boot: the cause is enough.
		var uerr *url.Error
		if errors.As(err, &uerr) {
			err = uerr.Err
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("no answer within %s: %w", e.timeout, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAuthorAnswer+1))
	switch {
	case err != nil:
		return nil, fmt.Errorf("read the answer: %w", err)
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("answered %d", resp.StatusCode)
	case len(data) > maxAuthorAnswer:
		return nil, fmt.Errorf("answered more than %d bytes", maxAuthorAnswer)
	}
	return data, nil
}

// unavailable is the transient decline author-unavailable, logged.
func (e *External) unavailable(ctx context.Context, c Claim, what string, err error) Outcome {
	e.warn(ctx, "grants: the external author failed; declined author-unavailable", c, slog.String("step", what), slog.String("error", err.Error()))
	return Outcome{Decision: declined(ReasonAuthorUnavailable)}
}

// invalid is the transient decline author-invalid, logged.
func (e *External) invalid(ctx context.Context, c Claim, why string) Outcome {
	e.warn(ctx, "grants: the external author's grant would be refused; declined author-invalid", c, slog.String("cause", why))
	return Outcome{Decision: declined(ReasonAuthorInvalid)}
}

func (e *External) warn(ctx context.Context, msg string, c Claim, attrs ...slog.Attr) {
	if e.logger == nil {
		return
	}
	attrs = append(attrs, slog.String("job_id", c.Stub.ID), slog.String("runner_id", c.RunnerID))
	e.logger.LogAttrs(ctx, slog.LevelWarn, msg, attrs...)
}
