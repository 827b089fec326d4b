package protocol

// Strict decoding of request bodies, as the reference's zod schemas read
// them (relay-behaviour.md RB-A5–RB-A15, RB-G18), on top of relayd's stricter JSON
// reading (design.md §3, RB-A0.3/RB-A0.4): a body that is not valid UTF-8, starts
// with a byte order mark or repeats a key is refused outright.
//
// Every decoder returns either the typed request or a *DecodeError. The
// plane turns any decode error into the one generic schema refusal; the
// error's text is for logs and tests and never goes on the wire.
//
// A Decoder also applies relayd's Limits, which bound what the schemas
// leave open (list lengths, ciphertext size, how many JSON values a body
// may hold), so that no body can cost the relay much more than its bytes.
// The package-level Decode functions use DefaultLimits.

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/byollm/relayd/protocol/strictjson"
)

// What a schema refused. A *DecodeError wraps one of these, or a
// strictjson error when the body is not acceptable JSON at all; test with
// errors.Is.
var (
	ErrUnknownField = errors.New("unknown field")
	ErrMissingField = errors.New("missing field")
	ErrWrongType    = errors.New("wrong type")
	ErrEmptyString  = errors.New("empty string")
	ErrNotAllowed   = errors.New("value not allowed")
	ErrNotInteger   = errors.New("not a safe integer")
	ErrOutOfRange   = errors.New("out of range")
	ErrOverLimit    = errors.New("over the limit")
)

// Defaults of Limits.
const (
	// DefaultMaxListItems caps capabilities, activeLeases and leases. A
	// daemon holds at most a few dozen grants (a claim takes 64 at most),
	// so 256 leaves room without letting one body name thousands of jobs.
	DefaultMaxListItems = 256
	// DefaultMaxCiphertextBytes caps an envelope's ciphertext text.
	DefaultMaxCiphertextBytes = 4 << 20
)

// Limits bounds what the request schemas leave open. A field left zero
// takes its default.
type Limits struct {
	// MaxListItems caps each list a body carries: capabilities,
	// activeLeases and leases. It also sets how many JSON values a body may
	// hold at all (see MaxValues), so that a body cannot hide a huge
	// number of values where the schema does not look.
	MaxListItems int
	// MaxCiphertextBytes caps the ciphertext of a sealed envelope, as the
	// base64url text sent.
	MaxCiphertextBytes int
}

// DefaultLimits returns the limits a relay applies unless configured
// otherwise.
func DefaultLimits() Limits {
	return Limits{MaxListItems: DefaultMaxListItems, MaxCiphertextBytes: DefaultMaxCiphertextBytes}
}

// withDefaults fills in the zero fields.
func (l Limits) withDefaults() Limits {
	if l.MaxListItems <= 0 {
		l.MaxListItems = DefaultMaxListItems
	}
	if l.MaxCiphertextBytes <= 0 {
		l.MaxCiphertextBytes = DefaultMaxCiphertextBytes
	}
	return l
}

// MaxValues is how many JSON values (scalars, arrays and objects) one body
// may hold under these limits. The largest valid body, a heartbeat with
// both lists full, holds about nine per list item (a capability is six
// values, a lease item three); sixteen per item leaves room for the extra
// keys lease items may carry (RB-G18) and for every fixed field.
func (l Limits) MaxValues() int {
	return 64 + 16*l.withDefaults().MaxListItems
}

// Decoder decodes request bodies under Limits. The zero Decoder applies
// DefaultLimits.
type Decoder struct {
	Limits Limits
}

// NewDecoder returns a decoder applying limits (zero fields take defaults).
func NewDecoder(limits Limits) Decoder { return Decoder{Limits: limits.withDefaults()} }

// DecodeError is a body or query that failed strict decoding. It is
// internal: the wire only ever says "request failed schema validation" (or
// the pair variant).
type DecodeError struct {
	// Schema names what was being decoded: "claim", "site/enqueue", ...
	Schema string
	// Path locates the problem, like "capabilities[0].kind"; empty when it
	// concerns the body as a whole.
	Path string
	// Err is the reason: an Err sentinel of this package, possibly wrapped
	// with detail, or a *strictjson.Error.
	Err error
}

// Error gives the short reason, for logs.
func (e *DecodeError) Error() string {
	where := e.Schema
	if e.Path != "" {
		where += " " + e.Path
	}
	return "protocol: decode " + where + ": " + e.Err.Error()
}

// Unwrap returns the reason.
func (e *DecodeError) Unwrap() error { return e.Err }

// Pair decodes the body of POST <base>/pair (RB-A5).
func (b *Body) Pair() (PairRequest, error) {
	return decodeBody(b, "pair", func(r *reader, v strictjson.Value) PairRequest {
		o := r.object(v, "", true, "protocolVersion", "owner", "device")
		return PairRequest{
			ProtocolVersion: r.oneOf(o, "protocolVersion", Version),
			Owner:           r.str(o, "owner"),
			Device:          r.identity(r.child(o, "device")),
		}
	})
}

// Claim decodes the body of POST <base>/claim (RB-A6.1). capabilities
// may be empty; max is an integer from 1 to MaxClaim.
func (b *Body) Claim() (ClaimRequest, error) {
	return decodeBody(b, "claim", func(r *reader, v strictjson.Value) ClaimRequest {
		o := r.object(v, "", true, "protocolVersion", "runnerId", "capabilities", "max")
		return ClaimRequest{
			ProtocolVersion: r.oneOf(o, "protocolVersion", Version),
			RunnerID:        r.str(o, "runnerId"),
			Capabilities:    r.capabilities(o, "capabilities"),
			Max:             int(r.integer(o, "max", 1, MaxClaim)),
		}
	})
}

// Fetch decodes the body of POST <base>/fetch (RB-A7.1). Unlike every
// other body, its protocolVersion may be any non-empty string (RB-G4).
func (b *Body) Fetch() (FetchRequest, error) {
	return decodeBody(b, "fetch", func(r *reader, v strictjson.Value) FetchRequest {
		o := r.object(v, "", true, "protocolVersion", "runnerId", "jobId", "leaseId")
		return FetchRequest{
			ProtocolVersion: r.str(o, "protocolVersion"),
			RunnerID:        r.str(o, "runnerId"),
			JobID:           r.str(o, "jobId"),
			LeaseID:         r.str(o, "leaseId"),
		}
	})
}

// Result decodes the body of POST <base>/result (RB-A8.1).
func (b *Body) Result() (ResultRequest, error) {
	return decodeBody(b, "result", func(r *reader, v strictjson.Value) ResultRequest {
		o := r.object(v, "", true, "protocolVersion", "runnerId", "jobId", "leaseId", "envelope", "disposition")
		return ResultRequest{
			ProtocolVersion: r.oneOf(o, "protocolVersion", Version),
			RunnerID:        r.str(o, "runnerId"),
			JobID:           r.str(o, "jobId"),
			LeaseID:         r.str(o, "leaseId"),
			Envelope:        r.envelope(r.child(o, "envelope")),
			Disposition:     r.oneOf(o, "disposition", dispositions...),
		}
	})
}

// Heartbeat decodes the body of POST <base>/heartbeat (RB-A9.1). Lease
// items are not strict: keys other than jobId and leaseId are dropped.
func (b *Body) Heartbeat() (HeartbeatRequest, error) {
	return decodeBody(b, "heartbeat", func(r *reader, v strictjson.Value) HeartbeatRequest {
		o := r.object(v, "", true, "protocolVersion", "runnerId", "daemonVersion", "capabilities", "activeLeases", "paused")
		return HeartbeatRequest{
			ProtocolVersion: r.oneOf(o, "protocolVersion", Version),
			RunnerID:        r.str(o, "runnerId"),
			DaemonVersion:   r.str(o, "daemonVersion"),
			Capabilities:    r.capabilities(o, "capabilities"),
			ActiveLeases:    r.leaseRefs(o, "activeLeases"),
			Paused:          r.boolean(o, "paused"),
		}
	})
}

// Release decodes the body of POST <base>/release (RB-A10.1). reason is
// required; lease items are not strict, as in heartbeat.
func (b *Body) Release() (ReleaseRequest, error) {
	return decodeBody(b, "release", func(r *reader, v strictjson.Value) ReleaseRequest {
		o := r.object(v, "", true, "protocolVersion", "runnerId", "leases", "reason")
		return ReleaseRequest{
			ProtocolVersion: r.oneOf(o, "protocolVersion", Version),
			RunnerID:        r.str(o, "runnerId"),
			Leases:          r.leaseRefs(o, "leases"),
			Reason:          r.oneOf(o, "reason", releaseReasons...),
		}
	})
}

// Enqueue decodes the body of POST /relay/site/enqueue (RB-A11.1).
func (b *Body) Enqueue() (EnqueueRequest, error) {
	return decodeBody(b, "site/enqueue", func(r *reader, v strictjson.Value) EnqueueRequest {
		o := r.object(v, "", true, "siteId", "stub")
		return EnqueueRequest{
			SiteID: r.str(o, "siteId"),
			Stub:   r.stub(r.child(o, "stub")),
		}
	})
}

// Payload decodes the body of POST /relay/site/payload (RB-A12.1).
func (b *Body) Payload() (PayloadRequest, error) {
	return decodeBody(b, "site/payload", func(r *reader, v strictjson.Value) PayloadRequest {
		o := r.object(v, "", true, "siteId", "jobId", "envelope")
		return PayloadRequest{
			SiteID:   r.str(o, "siteId"),
			JobID:    r.str(o, "jobId"),
			Envelope: r.envelope(r.child(o, "envelope")),
		}
	})
}

// Cancel decodes the body of POST /relay/site/cancel (RB-A13.1).
func (b *Body) Cancel() (CancelRequest, error) {
	return decodeBody(b, "site/cancel", func(r *reader, v strictjson.Value) CancelRequest {
		o := r.object(v, "", true, "siteId", "jobId")
		return CancelRequest{
			SiteID: r.str(o, "siteId"),
			JobID:  r.str(o, "jobId"),
		}
	})
}

// The Decoder's own methods decode a body given as bytes, for callers
// that read it once only.

// Pair decodes a pair body under d's limits.
func (d Decoder) Pair(body []byte) (PairRequest, error) { return d.Body(body).Pair() }

// Claim decodes a claim body under d's limits.
func (d Decoder) Claim(body []byte) (ClaimRequest, error) { return d.Body(body).Claim() }

// Fetch decodes a fetch body under d's limits.
func (d Decoder) Fetch(body []byte) (FetchRequest, error) { return d.Body(body).Fetch() }

// Result decodes a result body under d's limits.
func (d Decoder) Result(body []byte) (ResultRequest, error) { return d.Body(body).Result() }

// Heartbeat decodes a heartbeat body under d's limits.
func (d Decoder) Heartbeat(body []byte) (HeartbeatRequest, error) { return d.Body(body).Heartbeat() }

// Release decodes a release body under d's limits.
func (d Decoder) Release(body []byte) (ReleaseRequest, error) { return d.Body(body).Release() }

// Enqueue decodes a site/enqueue body under d's limits.
func (d Decoder) Enqueue(body []byte) (EnqueueRequest, error) { return d.Body(body).Enqueue() }

// Payload decodes a site/payload body under d's limits.
func (d Decoder) Payload(body []byte) (PayloadRequest, error) { return d.Body(body).Payload() }

// Cancel decodes a site/cancel body under d's limits.
func (d Decoder) Cancel(body []byte) (CancelRequest, error) { return d.Body(body).Cancel() }

// DecodePair decodes a pair body under DefaultLimits.
func DecodePair(body []byte) (PairRequest, error) { return Decoder{}.Pair(body) }

// DecodeClaim decodes a claim body under DefaultLimits.
func DecodeClaim(body []byte) (ClaimRequest, error) { return Decoder{}.Claim(body) }

// DecodeFetch decodes a fetch body under DefaultLimits.
func DecodeFetch(body []byte) (FetchRequest, error) { return Decoder{}.Fetch(body) }

// DecodeResult decodes a result body under DefaultLimits.
func DecodeResult(body []byte) (ResultRequest, error) { return Decoder{}.Result(body) }

// DecodeHeartbeat decodes a heartbeat body under DefaultLimits.
func DecodeHeartbeat(body []byte) (HeartbeatRequest, error) { return Decoder{}.Heartbeat(body) }

// DecodeRelease decodes a release body under DefaultLimits.
func DecodeRelease(body []byte) (ReleaseRequest, error) { return Decoder{}.Release(body) }

// DecodeEnqueue decodes an enqueue body under DefaultLimits.
func DecodeEnqueue(body []byte) (EnqueueRequest, error) { return Decoder{}.Enqueue(body) }

// DecodePayload decodes a payload body under DefaultLimits.
func DecodePayload(body []byte) (PayloadRequest, error) { return Decoder{}.Payload(body) }

// DecodeCancel decodes a cancel body under DefaultLimits.
func DecodeCancel(body []byte) (CancelRequest, error) { return Decoder{}.Cancel(body) }

// DecodeSiteQuery validates the siteId query parameter of GET
// /relay/site/pending and /results (RB-A14.1). The caller passes the first
// siteId value, already URL-decoded, or "" when there is none; "" is
// refused. So is text that is not valid UTF-8 (a query can carry any bytes
// percent-encoded), which the reference would rewrite to U+FFFD.
func DecodeSiteQuery(siteID string) (SiteQuery, error) {
	const schema = "site query"
	if siteID == "" {
		return SiteQuery{}, &DecodeError{Schema: schema, Path: "siteId", Err: ErrEmptyString}
	}
	if !utf8.ValidString(siteID) {
		return SiteQuery{}, &DecodeError{Schema: schema, Path: "siteId", Err: strictjson.ErrInvalidUTF8}
	}
	return SiteQuery{SiteID: siteID}, nil
}

// PeekProtocolVersion reads the protocolVersion of a daemon-plane body
// without checking anything else, for relayd's version check that runs
// before the signature (design.md §3, RB-G4).
//
// present is true when the body is a JSON object, as strict as the decoders
// want it, with a protocolVersion key, whatever that key's value. value is
// the key's string value, or "" when the value is not a string, so that
// "present and value != Version" is exactly "unsupported": a number 0, null
// or "" names another version as surely as "2" does. A body that is not a
// strictly valid JSON object (empty, malformed, an array, invalid UTF-8, a
// repeated key) names no version: present is false, and the body goes on
// to fail its schema in the usual order.
func PeekProtocolVersion(body []byte) (value string, present bool) {
	return Decoder{}.PeekProtocolVersion(body)
}

// PeekProtocolVersion is the package-level PeekProtocolVersion under d's
// limits. It runs before the signature is checked, so a body over the
// value cap names no version and is parsed no further.
func (d Decoder) PeekProtocolVersion(body []byte) (value string, present bool) {
	return d.Body(body).ProtocolVersion()
}

// HasUnsupportedVersion reports whether a daemon-plane body names a
// protocol version other than Version, in which case relayd answers with
// UnsupportedVersion before verifying the signature.
func HasUnsupportedVersion(body []byte) bool {
	v, present := PeekProtocolVersion(body)
	return present && v != Version
}

// Body is one request body as the relay reads it: the bytes its signature
// covers, parsed strictly at most once, on first use, under one Decoder's
// limits. The version check that runs before the signature and the schema
// that runs after it read the same parse, and a body that never reaches
// either is never parsed.
type Body struct {
	raw    []byte
	limits Limits
	parsed bool
	tree   strictjson.Value
	err    error
}

// Body wraps raw for decoding under d's limits.
func (d Decoder) Body(raw []byte) *Body {
	return &Body{raw: raw, limits: d.Limits.withDefaults()}
}

// Raw returns the body's bytes, as sent.
func (b *Body) Raw() []byte { return b.raw }

// parse returns the body's JSON tree, parsing it the first time.
func (b *Body) parse() (strictjson.Value, error) {
	if !b.parsed {
		b.tree, b.err = strictjson.ParseWith(b.raw, strictjson.Options{MaxValues: b.limits.MaxValues()})
		b.parsed = true
	}
	return b.tree, b.err
}

// ProtocolVersion reads the body's protocolVersion as PeekProtocolVersion
// describes. It runs before the signature is checked, so a body over the
// value cap names no version and is parsed no further.
func (b *Body) ProtocolVersion() (value string, present bool) {
	v, err := b.parse()
	if err != nil || v.Kind != strictjson.Object {
		return "", false
	}
	pv, ok := v.Get("protocolVersion")
	if !ok {
		return "", false
	}
	if pv.Kind != strictjson.String {
		return "", true
	}
	return pv.Text, true
}

// decodeBody hands the body's tree to read, which records the first schema
// problem in the reader.
func decodeBody[T any](b *Body, schema string, read func(*reader, strictjson.Value) T) (T, error) {
	var zero T
	v, err := b.parse()
	if err != nil {
		return zero, &DecodeError{Schema: schema, Err: err}
	}
	r := &reader{schema: schema, limits: b.limits}
	out := read(r, v)
	if r.err != nil {
		return zero, r.err
	}
	return out, nil
}

// reader applies schema rules to a parsed body. The first problem sticks:
// once r.err is set every later read is a no-op returning a zero value, so
// the decoders read as plain struct literals without an error check per
// field.
type reader struct {
	schema string
	limits Limits
	err    *DecodeError
}

func (r *reader) fail(path string, err error) {
	if r.err == nil {
		r.err = &DecodeError{Schema: r.schema, Path: path, Err: err}
	}
}

// obj is an object being read, with its path in the body.
type obj struct {
	v    strictjson.Value
	path string
}

// object checks that v is an object and, when strict, that it has no key
// outside known (zod's strict objects; non-strict ones drop such keys).
func (r *reader) object(v strictjson.Value, path string, strict bool, known ...string) obj {
	o := obj{path: path}
	if r.err != nil {
		return o
	}
	if v.Kind != strictjson.Object {
		r.fail(path, wrongType("object", v))
		return o
	}
	if strict {
		for _, m := range v.Members {
			if !slices.Contains(known, m.Key) {
				r.fail(path, fmt.Errorf("%w: %s", ErrUnknownField, strictjson.QuoteShort(m.Key)))
				return o
			}
		}
	}
	o.v = v
	return o
}

// field returns o's member key, recording a missing field.
func (r *reader) field(o obj, key string) (strictjson.Value, string, bool) {
	path := join(o.path, key)
	if r.err != nil {
		return strictjson.Value{}, path, false
	}
	v, ok := o.v.Get(key)
	if !ok {
		r.fail(path, ErrMissingField)
		return strictjson.Value{}, path, false
	}
	return v, path, true
}

// child returns a member and its path, for the nested readers.
func (r *reader) child(o obj, key string) (strictjson.Value, string) {
	v, path, _ := r.field(o, key)
	return v, path
}

// text reads a string member, empty or not. null is never a string.
func (r *reader) text(o obj, key string) (string, string, bool) {
	v, path, ok := r.field(o, key)
	if !ok {
		return "", path, false
	}
	if v.Kind != strictjson.String {
		r.fail(path, wrongType("string", v))
		return "", path, false
	}
	return v.Text, path, true
}

// str reads a non-empty string member.
func (r *reader) str(o obj, key string) string {
	s, path, ok := r.text(o, key)
	if ok && s == "" {
		r.fail(path, ErrEmptyString)
		return ""
	}
	return s
}

// oneOf reads a string member that must be one of allowed; with one
// allowed value it is a literal.
func (r *reader) oneOf(o obj, key string, allowed ...string) string {
	s, path, ok := r.text(o, key)
	if !ok {
		return ""
	}
	if !slices.Contains(allowed, s) {
		r.fail(path, fmt.Errorf("%w: %s", ErrNotAllowed, strictjson.QuoteShort(s)))
		return ""
	}
	return s
}

// boolean reads a true/false member.
func (r *reader) boolean(o obj, key string) bool {
	v, path, ok := r.field(o, key)
	if !ok {
		return false
	}
	if v.Kind != strictjson.Bool {
		r.fail(path, wrongType("boolean", v))
		return false
	}
	return v.Bool
}

// integer reads a number member that must be a safe integer within lo..hi.
func (r *reader) integer(o obj, key string, lo, hi int64) int64 {
	v, path, ok := r.field(o, key)
	if !ok {
		return 0
	}
	if v.Kind != strictjson.Number {
		r.fail(path, wrongType("number", v))
		return 0
	}
	n, ok := v.SafeInteger()
	if !ok {
		r.fail(path, fmt.Errorf("%w: %s", ErrNotInteger, strictjson.QuoteShort(v.Text)))
		return 0
	}
	if n < lo || n > hi {
		r.fail(path, fmt.Errorf("%w: %d not in %d..%d", ErrOutOfRange, n, lo, hi))
		return 0
	}
	return n
}

// positive reads a positive safe integer member, such as deadlineAt.
func (r *reader) positive(o obj, key string) int64 {
	return r.integer(o, key, 1, maxSafeInteger)
}

// array reads an array member of at most MaxListItems items, returning
// its items and its path.
func (r *reader) array(o obj, key string) ([]strictjson.Value, string) {
	v, path, ok := r.field(o, key)
	if !ok {
		return nil, path
	}
	if v.Kind != strictjson.Array {
		r.fail(path, wrongType("array", v))
		return nil, path
	}
	if n := len(v.Items); n > r.limits.MaxListItems {
		r.fail(path, fmt.Errorf("%w: %d items, at most %d", ErrOverLimit, n, r.limits.MaxListItems))
		return nil, path
	}
	return v.Items, path
}

// identity reads a strict PublicIdentity.
func (r *reader) identity(v strictjson.Value, path string) PublicIdentity {
	o := r.object(v, path, true, "identity", "encryption", "encryptionSig")
	return PublicIdentity{
		Identity:      r.str(o, "identity"),
		Encryption:    r.str(o, "encryption"),
		EncryptionSig: r.str(o, "encryptionSig"),
	}
}

// capabilities reads an array of strict Capability objects; empty is fine.
func (r *reader) capabilities(o obj, key string) []Capability {
	items, path := r.array(o, key)
	out := make([]Capability, 0, len(items))
	for i, item := range items {
		o := r.object(item, index(path, i), true, "kind", "backendId", "backendClass", "model", "offerScope")
		out = append(out, Capability{
			Kind:         r.oneOf(o, "kind", kinds...),
			BackendID:    r.oneOf(o, "backendId", backendIDs...),
			BackendClass: r.oneOf(o, "backendClass", backendClasses...),
			Model:        r.str(o, "model"),
			OfferScope:   r.oneOf(o, "offerScope", offerScopes...),
		})
		if r.err != nil {
			break
		}
	}
	return out
}

// leaseRefs reads an array of lease items. Items are not strict (RB-G18):
// other keys are dropped, but jobId and leaseId must be there.
func (r *reader) leaseRefs(o obj, key string) []LeaseRef {
	items, path := r.array(o, key)
	out := make([]LeaseRef, 0, len(items))
	for i, item := range items {
		o := r.object(item, index(path, i), false)
		out = append(out, LeaseRef{
			JobID:   r.str(o, "jobId"),
			LeaseID: r.str(o, "leaseId"),
		})
		if r.err != nil {
			break
		}
	}
	return out
}

// stub reads a strict JobStub.
func (r *reader) stub(v strictjson.Value, path string) JobStub {
	o := r.object(v, path, true, "id", "kind", "owner", "site", "audience", "sizeClass", "streaming", "deadlineAt")
	return JobStub{
		ID:         r.str(o, "id"),
		Kind:       r.oneOf(o, "kind", kinds...),
		Owner:      r.str(o, "owner"),
		Site:       r.str(o, "site"),
		Audience:   r.oneOf(o, "audience", audiences...),
		SizeClass:  r.oneOf(o, "sizeClass", sizeClasses...),
		Streaming:  r.boolean(o, "streaming"),
		DeadlineAt: r.positive(o, "deadlineAt"),
	}
}

// envelope reads a strict SealedEnvelope.
func (r *reader) envelope(v strictjson.Value, path string) SealedEnvelope {
	o := r.object(v, path, true, "ciphertext", "recipientKeyId", "senderKeyId", "direction", "deadlineAt")
	return SealedEnvelope{
		Ciphertext:     r.ciphertext(o),
		RecipientKeyID: r.str(o, "recipientKeyId"),
		SenderKeyID:    r.str(o, "senderKeyId"),
		Direction:      r.oneOf(o, "direction", directions...),
		DeadlineAt:     r.positive(o, "deadlineAt"),
	}
}

// ciphertext reads an envelope's ciphertext: a non-empty string of at most
// MaxCiphertextBytes bytes.
func (r *reader) ciphertext(o obj) string {
	s := r.str(o, "ciphertext")
	if len(s) > r.limits.MaxCiphertextBytes {
		r.fail(join(o.path, "ciphertext"), fmt.Errorf("%w: %d bytes, at most %d", ErrOverLimit, len(s), r.limits.MaxCiphertextBytes))
		return ""
	}
	return s
}

func wrongType(want string, got strictjson.Value) error {
	return fmt.Errorf("%w: want %s, got %s", ErrWrongType, want, got.Kind)
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func index(path string, i int) string {
	return path + "[" + strconv.Itoa(i) + "]"
}
