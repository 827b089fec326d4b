// Package plane is relayd's HTTP surface: the daemon plane, the site plane,
// the debug page and the admin endpoints, on labstack/echo. Echo stays inside
// this package so that moving to another router touches nothing else.
//
// Routing follows the reference relay exactly: dispatch is on the escaped
// request path with its dot segments resolved, echo's router serves the
// fixed site-plane paths, and anything under the base path is dispatched by
// its last segment. For each routed request the plane reads the body once,
// its classifier picks the codec of the protocol version the request
// declares (plane/codec0 serves protocol "0"), and the codec's answer or
// error goes to one writer, echo's error handler.
package plane

import (
	"crypto/rand"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/ratelimit"
	"github.com/byollm/relayd/store"
)

// Config is what a relay needs to serve.
type Config struct {
	// SiteID is the one site this relay routes for.
	SiteID string
	// ResultsAnswerBytes bounds each kept results answer (the rendered
	// bytes a site's unchanged poll is sent again); 0 keeps none.
	ResultsAnswerBytes int64
	// BasePath prefixes the daemon plane; trailing slashes are dropped.
	BasePath string
	// LeaseMs is the lease length granted and renewed.
	LeaseMs int64
	// Store holds the routing state.
	Store store.RoutingStore
	// Pairings holds the pending device codes, beside Store. Nil means
	// none are kept: no user code resolves.
	Pairings store.Pairings
	// Projection returns the projection in force now.
	Projection func() *projection.Projection
	// Clock is the relay's own clock: signature freshness and serverTime.
	// Leases and deadlines use the store's clock instead.
	Clock clock.Clock
	// Logger receives one line per request; never bodies or signatures.
	Logger *slog.Logger
	// MaxBodyBytes caps a request body; larger ones get 413.
	MaxBodyBytes int64
	// Limits bounds what a body may hold beyond its size: list lengths,
	// ciphertext size, JSON values. Zero fields take protocol's defaults.
	Limits protocol.Limits
	// RunnerLimit limits each runner, once its signature checks, and each
	// client address that pairs; the zero Limit limits nothing. Stored
	// (the routing store's own limiter, as the server's backends build
	// it), a signed daemon call has its runner checked and charged within
	// its store operation, one round trip for all of it; Apart, the
	// charge is a call of its own.
	RunnerLimit ratelimit.Limit
	// SiteLimit limits each site, once its signature checks, as
	// RunnerLimit does: stored, a site's write is charged within its
	// store operation.
	SiteLimit ratelimit.Limit
	// TrustForwardedFor takes a pairing client's address from the last
	// X-Forwarded-For entry, which a load balancer in front appends, instead
	// of from the connection. Set it only behind such a load balancer: a
	// caller reaching the relay directly chooses that header.
	TrustForwardedFor bool
	// PublicDebug serves the debug page on the public listener too.
	PublicDebug bool
	// AdminHosts are the Host names, beyond localhost and IP literals, that
	// the admin listener and the public debug page answer for; AnyHost
	// answers every one (see AdminHosts).
	AdminHosts []string
	// ObserveRequest, when set, is told of every answered request. route
	// comes from a small fixed set, never from the raw path.
	ObserveRequest func(route string, status int, took time.Duration)
	// RequestStarted, when set, is told as each request begins; every call
	// is followed by one ObserveRequest when the request is answered.
	RequestStarted func()

	// Protocols are the wire protocols served; the zero value is "0" alone.
	Protocols Protocols
	// V2 holds protocol "2"'s settings: device-code pairing, the daemon
	// floor and the update offer.
	V2 codec2.Options
	// Random is where pairing codes are drawn from; nil is crypto/rand.
	Random io.Reader
}

// Relay serves the byollm protocol.
type Relay struct {
	cfg      Config
	basePath string
	decoder  protocol.Decoder
	// env is what the codecs serve from; the plane charges the pairing
	// client addresses through it too.
	env        *codec.Env
	classifier classifier
	public     *echo.Echo
	adminHosts AdminHosts
}

// New builds a relay from cfg, filling in defaults.
func New(cfg Config) *Relay {
	if cfg.LeaseMs <= 0 {
		cfg.LeaseMs = protocol.DefaultLeaseMs
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = protocol.DefaultMaxBodyBytes
	}
	if cfg.Random == nil {
		cfg.Random = rand.Reader
	}
	base := cfg.BasePath
	if base == "" {
		base = protocol.DefaultBasePath
	}
	r := &Relay{cfg: cfg, basePath: strings.TrimRight(base, "/"), decoder: protocol.NewDecoder(cfg.Limits), adminHosts: NewAdminHosts(cfg.AdminHosts)}
	r.env = &codec.Env{
		SiteID: cfg.SiteID, LeaseMs: cfg.LeaseMs, Store: cfg.Store, Projection: cfg.Projection, Clock: cfg.Clock,
		RunnerLimit: cfg.RunnerLimit, SiteLimit: cfg.SiteLimit,
		Pairings: cfg.Pairings, Random: cfg.Random, Logger: cfg.Logger,
		ResultsAnswers: codec.NewResultsAnswers(cfg.ResultsAnswerBytes),
	}
	r.classifier = newClassifier(r.env, cfg)
	r.public = newEcho(cfg.Logger, observer{started: cfg.RequestStarted, answered: cfg.ObserveRequest})
	r.public.Pre(resolvePath)
	// The reference never checks the method (RB-A0.6). Echo's Any covers only
	// the common ones, so a site route is its path's not-found handler,
	// which echo runs for every method; the catch-all takes other methods
	// the same way.
	for _, name := range codec.SiteEndpoints() {
		r.public.RouteNotFound("/relay/site/"+name, r.siteRoute(name))
	}
	r.public.Any("/*", r.dispatch)
	r.public.Any("/", r.dispatch)
	r.public.RouteNotFound("/*", r.dispatch)
	return r
}

// Handler returns the public listener's handler: the protocol only, plus the
// debug page when PublicDebug is set.
func (r *Relay) Handler() http.Handler { return r.public }

// newEcho returns an echo instance with relayd's middleware: request ids,
// one log line per request and panics turned into a JSON 500, run before
// routing so that they see every request; and the one writer of every
// refusal and failure as its error handler.
func newEcho(logger *slog.Logger, observe observer) *echo.Echo {
	e := echo.New()
	e.HideBanner = true
	e.HidePort = true
	e.HTTPErrorHandler = errorWriter(logger)
	e.Pre(requestLog(logger, observe), recoverPanics(logger))
	return e
}

// siteRoute serves one of the fixed site-plane routes (RB-A4).
func (r *Relay) siteRoute(name string) echo.HandlerFunc {
	return func(c echo.Context) error {
		setRoute(c, "site/"+name)
		return r.serve(c, codec.Site, name)
	}
}

// dispatch routes every other public request, in the reference's order
// (RB-A1): the debug page where it is public, then the daemon plane by the
// last path segment under the base path.
func (r *Relay) dispatch(c echo.Context) error {
	path := c.Request().URL.EscapedPath()
	if r.cfg.PublicDebug && (path == "/debug" || path == r.basePath+"/debug") {
		setRoute(c, "debug")
		// The public listener answers any Host, but its debug page is as
		// private as the admin listener's.
		if host := c.Request().Host; !r.adminHosts.Allow(host) {
			return misdirected(host)
		}
		return r.serveDebug(c)
	}
	if !strings.HasPrefix(path, r.basePath+"/") {
		return protocol.NotFoundPath()
	}
	endpoint := path[strings.LastIndexByte(path, '/')+1:]
	if !codec.DaemonEndpoint(endpoint) {
		return protocol.NotFoundPath()
	}
	setRoute(c, endpoint)
	return r.serve(c, codec.Daemon, endpoint)
}

// serve answers one routed request: it reads the body, has the classifier
// pick the request's codec, and encodes the codec's answer. Refusals and
// failures go back to echo as errors, for the one writer.
func (r *Relay) serve(c echo.Context, plane codec.Plane, endpoint string) error {
	req := c.Request()
	ctx := req.Context()
	var clientAddr string
	if plane == codec.Daemon && codec.Unsigned(endpoint) {
		// Unsigned, so charged to the client address, before the body is read.
		clientAddr = r.clientAddr(req)
		if refusal := r.env.Charge(ctx, r.cfg.RunnerLimit, "addr:"+clientAddr); refusal != nil {
			return refusal
		}
	}
	body, err := r.readBody(req)
	if err != nil {
		return err
	}
	cdc, schema, err := r.classifier.classify(plane, body, req.URL.RawQuery)
	if err != nil {
		return err
	}
	request := &codec.Request{Plane: plane, Endpoint: endpoint, Header: req.Header, ClientAddr: clientAddr, RawQuery: req.URL.RawQuery, Body: body}
	if schema != nil {
		request.Schema = r.decoder.Body(schema)
	}
	answer, err := cdc.Serve(ctx, request)
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, answer)
}

// resolvePath has echo route on the request's path with its dot segments
// resolved, as the reference's URL parser leaves it. The path stays
// escaped: an encoded slash is never a separator. Like echo's own rewrite
// middleware it edits the URL in place, the one echo routes on; the
// request log has noted the path as sent already.
func resolvePath(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		u := c.Request().URL
		escaped := u.EscapedPath()
		if resolved := resolveDotSegments(escaped); resolved != escaped {
			if path, err := url.PathUnescape(resolved); err == nil {
				u.Path, u.RawPath = path, resolved
			}
		}
		return next(c)
	}
}

// resolveDotSegments removes "." and ".." segments the way a WHATWG URL
// parser does, leaving percent-escapes alone.
func resolveDotSegments(p string) string {
	if !strings.Contains(p, ".") && !strings.Contains(strings.ToLower(p), "%2e") {
		return p
	}
	segs := strings.Split(p, "/")
	out := make([]string, 0, len(segs))
	for i, s := range segs {
		last := i == len(segs)-1
		switch strings.ToLower(s) {
		case ".", "%2e":
			if last {
				out = append(out, "")
			}
		case "..", ".%2e", "%2e.", "%2e%2e":
			if len(out) > 1 {
				out = out[:len(out)-1]
			}
			if last {
				out = append(out, "")
			}
		default:
			out = append(out, s)
		}
	}
	if len(out) == 1 && out[0] == "" {
		return "/"
	}
	return strings.Join(out, "/")
}

// readBody reads the body of a POST; every other method has an empty body
// (RB-A0.3). A body over the cap is refused with 413.
func (r *Relay) readBody(req *http.Request) (*protocol.Body, error) {
	if req.Method != http.MethodPost || req.Body == nil {
		return r.decoder.Body(nil), nil
	}
	raw, err := readCapped(req.Body, r.cfg.MaxBodyBytes)
	if errors.Is(err, errTooLarge) {
		return nil, protocol.RefuseWith(http.StatusRequestEntityTooLarge, protocol.CodeBadRequest, "the request body is larger than this relay accepts")
	}
	if err != nil {
		return nil, protocol.Refuse(protocol.CodeBadRequest, "the request body could not be read")
	}
	return r.decoder.Body(raw), nil
}

var errTooLarge = errors.New("request body too large")

func readCapped(r io.Reader, limit int64) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(body)) > limit {
		return nil, errTooLarge
	}
	return body, nil
}

func (r *Relay) projection() *projection.Projection { return r.cfg.Projection() }

func (r *Relay) nowMs() int64 { return clock.UnixMilli(r.cfg.Clock) }
