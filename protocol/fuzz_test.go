package protocol

// Fuzz targets for what a stranger controls before and after auth: every
// request body schema, and the signature headers. Their seed corpora live
// in testdata/fuzz/<Name>/ and replay in every normal test run.

import (
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/byollm/relayd/protocol/strictjson"
)

// decoderSchemas lists every body decoder of d, named as its errors name
// the schema.
func decoderSchemas(d Decoder) []schema {
	return []schema{
		{name: "pair", decode: erase(d.Pair)},
		{name: "claim", decode: erase(d.Claim)},
		{name: "fetch", decode: erase(d.Fetch)},
		{name: "result", decode: erase(d.Result)},
		{name: "heartbeat", decode: erase(d.Heartbeat)},
		{name: "release", decode: erase(d.Release)},
		{name: "site/enqueue", decode: erase(d.Enqueue)},
		{name: "site/payload", decode: erase(d.Payload)},
		{name: "site/cancel", decode: erase(d.Cancel)},
	}
}

// fuzzDecoders are the defaults and limits small enough for the fuzzer to
// reach every cap often.
var fuzzDecoders = []Decoder{{}, NewDecoder(Limits{MaxListItems: 3, MaxCiphertextBytes: 24})}

// FuzzDecode feeds one body to every decoder. A decoder must never panic;
// a refusal must be a *DecodeError naming its schema and decode to
// nothing; an acceptance must be within the schema and the limits, must
// come from valid JSON, and must survive a round trip through
// encoding/json unchanged (so no two readings of one body differ).
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		accepted := false
		for _, d := range fuzzDecoders {
			limits := d.Limits.withDefaults()
			for _, s := range decoderSchemas(d) {
				v, err := s.decode(body)
				if err != nil {
					var derr *DecodeError
					if !errors.As(err, &derr) || derr.Schema != s.name {
						t.Fatalf("%s: refusal is not a *DecodeError of its schema: %v", s.name, err)
					}
					if reflectZero(v) != 0 {
						t.Fatalf("%s: refused body decoded to %+v", s.name, v)
					}
					continue
				}
				accepted = true
				if problem := outOfSchema(v, limits); problem != "" {
					t.Fatalf("%s: accepted %+v: %s", s.name, v, problem)
				}
				again, err := s.decode(mustJSON(t, v))
				if err != nil || !reflect.DeepEqual(again, v) {
					t.Fatalf("%s: %+v does not survive a round trip: %+v, %v", s.name, v, again, err)
				}
			}
			value, present := d.PeekProtocolVersion(body)
			if present {
				if _, err := strictjson.ParseWith(body, strictjson.Options{MaxValues: limits.MaxValues()}); err != nil {
					t.Fatalf("a version was read from a body the decoders refuse to parse: %v", err)
				}
			} else if value != "" {
				t.Fatalf("no version present, yet value %q", value)
			}
		}
		if accepted && !json.Valid(body) {
			t.Fatalf("accepted a body encoding/json calls invalid: %q", body)
		}
		if q, err := DecodeSiteQuery(string(body)); err == nil && (q.SiteID == "" || !utf8.ValidString(q.SiteID)) {
			t.Fatalf("accepted site query %q", q.SiteID)
		}
	})
}

// outOfSchema describes how an accepted request breaks its schema or the
// limits, or returns "".
func outOfSchema(v any, l Limits) string {
	var p problems
	switch r := v.(type) {
	case PairRequest:
		p.literal("protocolVersion", r.ProtocolVersion, Version)
		p.nonEmpty("owner", r.Owner)
		p.identity(r.Device)
	case ClaimRequest:
		p.literal("protocolVersion", r.ProtocolVersion, Version)
		p.nonEmpty("runnerId", r.RunnerID)
		p.capabilities(r.Capabilities, l)
		p.check(r.Max >= 1 && r.Max <= MaxClaim, "max "+strconv.Itoa(r.Max))
	case FetchRequest:
		p.nonEmpty("protocolVersion", r.ProtocolVersion)
		p.nonEmpty("runnerId", r.RunnerID)
		p.nonEmpty("jobId", r.JobID)
		p.nonEmpty("leaseId", r.LeaseID)
	case ResultRequest:
		p.literal("protocolVersion", r.ProtocolVersion, Version)
		p.nonEmpty("runnerId", r.RunnerID)
		p.nonEmpty("jobId", r.JobID)
		p.nonEmpty("leaseId", r.LeaseID)
		p.envelope(r.Envelope, l)
		p.literal("disposition", r.Disposition, dispositions...)
	case HeartbeatRequest:
		p.literal("protocolVersion", r.ProtocolVersion, Version)
		p.nonEmpty("runnerId", r.RunnerID)
		p.nonEmpty("daemonVersion", r.DaemonVersion)
		p.capabilities(r.Capabilities, l)
		p.leases(r.ActiveLeases, l)
	case ReleaseRequest:
		p.literal("protocolVersion", r.ProtocolVersion, Version)
		p.nonEmpty("runnerId", r.RunnerID)
		p.leases(r.Leases, l)
		p.literal("reason", r.Reason, releaseReasons...)
	case EnqueueRequest:
		p.nonEmpty("siteId", r.SiteID)
		s := r.Stub
		for name, text := range map[string]string{"id": s.ID, "owner": s.Owner, "site": s.Site} {
			p.nonEmpty("stub."+name, text)
		}
		p.literal("stub.kind", s.Kind, kinds...)
		p.literal("stub.audience", s.Audience, audiences...)
		p.literal("stub.sizeClass", s.SizeClass, sizeClasses...)
		p.check(s.DeadlineAt >= 1 && s.DeadlineAt <= maxSafeInteger, "stub.deadlineAt")
	case PayloadRequest:
		p.nonEmpty("siteId", r.SiteID)
		p.nonEmpty("jobId", r.JobID)
		p.envelope(r.Envelope, l)
	case CancelRequest:
		p.nonEmpty("siteId", r.SiteID)
		p.nonEmpty("jobId", r.JobID)
	default:
		return "unknown request type " + reflect.TypeOf(v).String()
	}
	return strings.Join(p, "; ")
}

type problems []string

func (p *problems) check(ok bool, what string) {
	if !ok {
		*p = append(*p, what)
	}
}

func (p *problems) nonEmpty(field, s string) {
	p.check(s != "" && utf8.ValidString(s), field+" empty or not UTF-8")
}

func (p *problems) literal(field, s string, allowed ...string) {
	p.check(slices.Contains(allowed, s), field+" "+strconv.Quote(s))
}

func (p *problems) identity(id PublicIdentity) {
	p.nonEmpty("identity", id.Identity)
	p.nonEmpty("encryption", id.Encryption)
	p.nonEmpty("encryptionSig", id.EncryptionSig)
}

func (p *problems) capabilities(caps []Capability, l Limits) {
	p.check(caps != nil && len(caps) <= l.MaxListItems, "capabilities nil or over the cap")
	for _, c := range caps {
		p.literal("kind", c.Kind, kinds...)
		p.literal("backendId", c.BackendID, backendIDs...)
		p.literal("backendClass", c.BackendClass, backendClasses...)
		p.literal("offerScope", c.OfferScope, offerScopes...)
		p.nonEmpty("model", c.Model)
	}
}

func (p *problems) leases(leases []LeaseRef, l Limits) {
	p.check(leases != nil && len(leases) <= l.MaxListItems, "leases nil or over the cap")
	for _, r := range leases {
		p.nonEmpty("jobId", r.JobID)
		p.nonEmpty("leaseId", r.LeaseID)
	}
}

func (p *problems) envelope(e SealedEnvelope, l Limits) {
	p.nonEmpty("ciphertext", e.Ciphertext)
	p.check(len(e.Ciphertext) <= l.MaxCiphertextBytes, "ciphertext over the cap")
	p.nonEmpty("recipientKeyId", e.RecipientKeyID)
	p.nonEmpty("senderKeyId", e.SenderKeyID)
	p.literal("direction", e.Direction, directions...)
	p.check(e.DeadlineAt >= 1 && e.DeadlineAt <= maxSafeInteger, "envelope.deadlineAt")
}

// FuzzParseSignature feeds arbitrary signature headers, each possibly
// repeated, and checks what the relay accepts as signed: a non-empty
// caller and signature, and an issuedAt that is exactly the decimal digits
// sent, positive and safe. Verification of whatever was parsed must give
// a verdict, never panic, whatever the key text.
func FuzzParseSignature(f *testing.F) {
	f.Fuzz(func(t *testing.T, caller, issuedAt, signature, key string, repeat uint8) {
		h := http.Header{}
		for i, v := range []string{caller, issuedAt, signature} {
			name := []string{HeaderRunner, HeaderIssuedAt, HeaderSignature}[i]
			// Bit i of repeat drops the header, bit i+3 sends it twice.
			if repeat&(1<<i) != 0 {
				continue
			}
			h.Add(name, v)
			if repeat&(1<<(i+3)) != 0 {
				h.Add(name, v)
			}
		}
		sig, ok := ParseSignature(h, HeaderRunner)
		if !ok {
			if sig != (Signature{}) {
				t.Fatalf("unsigned, yet %+v", sig)
			}
		} else {
			issued := strings.Join(h.Values(HeaderIssuedAt), ", ")
			if sig.CallerID == "" || sig.Signature == "" || sig.IssuedAt <= 0 || sig.IssuedAt > maxSafeInteger {
				t.Fatalf("accepted %+v", sig)
			}
			if strings.Trim(issued, "0123456789") != "" {
				t.Fatalf("issuedAt %q is not decimal digits", issued)
			}
			if n, err := strconv.ParseInt(issued, 10, 64); err != nil || n != sig.IssuedAt {
				t.Fatalf("issuedAt %q read as %d", issued, sig.IssuedAt)
			}
			if sig.CallerID != strings.Join(h.Values(HeaderRunner), ", ") {
				t.Fatalf("caller %q is not the header as sent", sig.CallerID)
			}
		}
		for _, now := range []int64{sig.IssuedAt, sig.IssuedAt + MaxClockSkewMs + 1} {
			switch v := Verify(sig, "claim", []byte(caller), key, now); v {
			case Valid, Stale, BadSignature:
			default:
				t.Fatalf("verdict %d", v)
			}
		}
		_ = PublicIdentity{Identity: key, Encryption: caller, EncryptionSig: signature}.IsConsistent()
		if id, ok := KeyIDOf(key); ok && (len(id) != len("BYOLLM-")+6*5-1 || !strings.HasPrefix(id, "BYOLLM-")) {
			t.Fatalf("key id %q", id)
		}
	})
}
