package proto2

// Strict decoding of v2 bodies, as the reference's zod schemas read them
// (§3.5-§3.15, §3.19): every object strict at every level, integers as
// zod's .int(), string lengths in code points, and on top of that relayd's
// stricter JSON (design RB-A0.3, RB-A0.4) through protocol/strictjson.
//
// A refusal is a *protocol.DecodeError wrapping one of protocol's Err
// sentinels (or a *strictjson.Error). Its text is for logs and tests: the
// wire says only SchemaRefusal() or PairSchemaRefusal().

import (
	"unicode/utf8"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/strictjson"
)

// Limits bounds what the v2 schemas leave open, as relayd bounds "0"
// (design RB-G26). The envelope itself is bounded by the reference's own rule
// (EnvelopeTooLarge), not here, so no envelope "2" accepts is refused by a
// decoder (decision P2-D2).
type Limits struct {
	// MaxListItems caps every list a body carries: capabilities,
	// knownModels, withheld, claimants, activeLeases, leases, and in
	// responses jobs, cancel, lost, awaitingConsent and successions. Zero
	// takes protocol.DefaultMaxListItems.
	MaxListItems int
}

func (l Limits) withDefaults() Limits {
	if l.MaxListItems <= 0 {
		l.MaxListItems = protocol.DefaultMaxListItems
	}
	return l
}

// MaxValues is how many JSON values one body may hold under these limits.
// A capability is about a dozen values with a short knownModels list and
// a withheld kind about ten, so 32 per list item leaves room for every
// real daemon while no body can cost much more than its bytes.
func (l Limits) MaxValues() int { return 64 + 32*l.withDefaults().MaxListItems }

// Decoder decodes v2 bodies under Limits. The zero Decoder applies the
// defaults.
type Decoder struct {
	Limits Limits
}

// decode parses body strictly and reads it with read.
func decode[T any](dec Decoder, body []byte, schema string, read func(node) T) (T, error) {
	v, limits, err := dec.parse(body, schema)
	if err != nil {
		var zero T
		return zero, err
	}
	return readAs(v, limits, schema, read)
}

func (dec Decoder) parse(body []byte, schema string) (strictjson.Value, Limits, error) {
	limits := dec.Limits.withDefaults()
	v, err := strictjson.ParseWith(body, strictjson.Options{MaxValues: limits.MaxValues()})
	if err != nil {
		return strictjson.Value{}, limits, &protocol.DecodeError{Schema: schema, Err: err}
	}
	return v, limits, nil
}

// readAs reads a parsed body against one schema.
func readAs[T any](v strictjson.Value, limits Limits, schema string, read func(node) T) (T, error) {
	d := &decoding{schema: schema, limits: limits}
	out := read(node{d: d, v: v, live: true})
	if d.err != nil {
		var zero T
		return zero, d.err
	}
	return out, nil
}

// Pair decodes a pair body: the first of the start, poll and fixture
// schemas it satisfies, in the reference's order (§3.5). When none does,
// the error is that of the schema the body's action names, or the
// fixture's when it names neither.
func (dec Decoder) Pair(body []byte) (PairRequest, error) {
	v, limits, err := dec.parse(body, "pair")
	if err != nil {
		return PairRequest{}, err
	}
	start, startErr := readAs(v, limits, "pair/start", readPairStart)
	if startErr == nil {
		return PairRequest{Start: &start}, nil
	}
	poll, pollErr := readAs(v, limits, "pair/poll", readPairPoll)
	if pollErr == nil {
		return PairRequest{Poll: &poll}, nil
	}
	fixture, err := readAs(v, limits, "pair", readPairFixture)
	if err == nil {
		return PairRequest{Fixture: &fixture}, nil
	}
	switch action, _ := v.Get("action"); action.Text {
	case ActionStart:
		return PairRequest{}, startErr
	case ActionPoll:
		return PairRequest{}, pollErr
	}
	return PairRequest{}, err
}

func readPairStart(n node) PairStartRequest {
	o := n.strict("protocolVersion", "action", "daemon", "device", "capabilities")
	return PairStartRequest{
		ProtocolVersion: o.key("protocolVersion").oneOf(Version),
		Action:          o.key("action").oneOf(ActionStart),
		Daemon:          readDaemon(o.key("daemon")),
		Device:          readIdentity(o.key("device")),
		Capabilities:    each(o.key("capabilities"), 0, readCapability),
	}
}

func readPairPoll(n node) PairPollRequest {
	o := n.strict("protocolVersion", "action", "deviceCode")
	return PairPollRequest{
		ProtocolVersion: o.key("protocolVersion").oneOf(Version),
		Action:          o.key("action").oneOf(ActionPoll),
		DeviceCode:      o.key("deviceCode").sized(MinDeviceCode, -1),
	}
}

func readPairFixture(n node) PairFixtureRequest {
	o := n.strict("protocolVersion", "owner", "device")
	return PairFixtureRequest{
		ProtocolVersion: o.key("protocolVersion").oneOf(Version),
		Owner:           o.key("owner").nonEmpty(),
		Device:          readIdentity(o.key("device")),
	}
}

// Claim decodes the body of POST <base>/claim.
func (dec Decoder) Claim(body []byte) (ClaimRequest, error) {
	return decode(dec, body, "claim", func(n node) ClaimRequest {
		o := n.strict("protocolVersion", "runnerId", "capabilities", "max")
		return ClaimRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			RunnerID:        o.key("runnerId").nonEmpty(),
			Capabilities:    each(o.key("capabilities"), 0, readCapability),
			Max:             int(o.key("max").integer(1, MaxClaim)),
		}
	})
}

// Fetch decodes the body of POST <base>/fetch. Unlike "0", the version
// is the literal "2".
func (dec Decoder) Fetch(body []byte) (FetchRequest, error) {
	return decode(dec, body, "fetch", func(n node) FetchRequest {
		o := n.strict("protocolVersion", "runnerId", "jobId", "leaseId")
		return FetchRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			RunnerID:        o.key("runnerId").nonEmpty(),
			JobID:           o.key("jobId").nonEmpty(),
			LeaseID:         o.key("leaseId").nonEmpty(),
		}
	})
}

// Result decodes the body of POST <base>/result. The envelope's size is
// checked apart, with EnvelopeTooLarge.
func (dec Decoder) Result(body []byte) (ResultRequest, error) {
	return decode(dec, body, "result", func(n node) ResultRequest {
		o := n.strict("protocolVersion", "runnerId", "jobId", "leaseId", "envelope", "disposition")
		return ResultRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			RunnerID:        o.key("runnerId").nonEmpty(),
			JobID:           o.key("jobId").nonEmpty(),
			LeaseID:         o.key("leaseId").nonEmpty(),
			Envelope:        readEnvelope(o.key("envelope")),
			Disposition:     o.key("disposition").oneOf(dispositions...),
		}
	})
}

// Heartbeat decodes the body of POST <base>/heartbeat. "0"'s paused is
// an unknown key here; an absent withheld decodes to [].
func (dec Decoder) Heartbeat(body []byte) (HeartbeatRequest, error) {
	return decode(dec, body, "heartbeat", func(n node) HeartbeatRequest {
		o := n.strict("protocolVersion", "runnerId", "daemonVersion", "capabilities", "withheld", "activeLeases")
		withheld := []WithheldKind{}
		if o.has("withheld") {
			withheld = each(o.key("withheld"), 0, readWithheld)
		}
		return HeartbeatRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			RunnerID:        o.key("runnerId").nonEmpty(),
			DaemonVersion:   o.key("daemonVersion").nonEmpty(),
			Capabilities:    each(o.key("capabilities"), 0, readCapability),
			Withheld:        withheld,
			ActiveLeases:    each(o.key("activeLeases"), 0, readGrantRef),
		}
	})
}

// Release decodes the body of POST <base>/release; reason is required.
func (dec Decoder) Release(body []byte) (ReleaseRequest, error) {
	return decode(dec, body, "release", func(n node) ReleaseRequest {
		o := n.strict("protocolVersion", "runnerId", "leases", "reason")
		return ReleaseRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			RunnerID:        o.key("runnerId").nonEmpty(),
			Leases:          each(o.key("leases"), 0, readGrantRef),
			Reason:          o.key("reason").oneOf(releaseReasons...),
		}
	})
}

// Enqueue decodes the body of POST /relay/site/enqueue. A "0" audience or
// any field outside JobStub is refused.
func (dec Decoder) Enqueue(body []byte) (EnqueueRequest, error) {
	return decode(dec, body, "site/enqueue", func(n node) EnqueueRequest {
		o := n.strict("protocolVersion", "siteId", "stub")
		return EnqueueRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			SiteID:          o.key("siteId").nonEmpty(),
			Stub:            readStub(o.key("stub")),
		}
	})
}

// Payload decodes the body of POST /relay/site/payload. The envelope's
// size is checked apart, with EnvelopeTooLarge.
func (dec Decoder) Payload(body []byte) (PayloadRequest, error) {
	return decode(dec, body, "site/payload", func(n node) PayloadRequest {
		o := n.strict("protocolVersion", "siteId", "jobId", "envelope")
		return PayloadRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			SiteID:          o.key("siteId").nonEmpty(),
			JobID:           o.key("jobId").nonEmpty(),
			Envelope:        readEnvelope(o.key("envelope")),
		}
	})
}

// Cancel decodes the body of POST /relay/site/cancel.
func (dec Decoder) Cancel(body []byte) (CancelRequest, error) {
	return decode(dec, body, "site/cancel", func(n node) CancelRequest {
		o := n.strict("protocolVersion", "siteId", "jobId")
		return CancelRequest{
			ProtocolVersion: o.key("protocolVersion").oneOf(Version),
			SiteID:          o.key("siteId").nonEmpty(),
			JobID:           o.key("jobId").nonEmpty(),
		}
	})
}

// DecodeSiteQuery validates the query of GET /relay/site/pending and
// /results: the reference validates {siteId: <first siteId value, or "">}
// against a strict schema with no version (§2.1.6, §3.14), so "" is
// refused; so is text that is not valid UTF-8 once percent-decoded.
func DecodeSiteQuery(rawQuery string) (SiteQuery, error) {
	const schema = "site/query"
	siteID, _ := FirstQueryValue(rawQuery, "siteId")
	if siteID == "" {
		return SiteQuery{}, &protocol.DecodeError{Schema: schema, Path: "siteId", Err: protocol.ErrEmptyString}
	}
	if !utf8.ValidString(siteID) {
		return SiteQuery{}, &protocol.DecodeError{Schema: schema, Path: "siteId", Err: strictjson.ErrInvalidUTF8}
	}
	return SiteQuery{SiteID: siteID}, nil
}
