package proto2

// Strict decoders of the answers, as the published daemon parses them
// (§3.18), for Go test clients that must be as picky as the real ones and
// for the golden tests. The site-plane answers have no published schema
// (the SDK casts them); they are read strictly in the shapes relayd sends.

import (
	"fmt"
	"net/url"

	"github.com/byollm/relayd/protocol"
)

// answers reads relay answers with room for any list a busy relay sends
// (results are not consumed, so a site's list can grow long): the relay
// is the trusted side here, and the caps are for what strangers send.
var answers = Decoder{Limits: Limits{MaxListItems: 1 << 20}}

// DecodePairFixtureResponse reads the answer to a fixture pair.
func DecodePairFixtureResponse(body []byte) (PairFixtureResponse, error) {
	return decode(answers, body, "pair response", func(n node) PairFixtureResponse {
		o := n.strict("protocolVersion", "runnerId", "sites", "controlPlanePublic")
		return PairFixtureResponse{
			ProtocolVersion:    o.key("protocolVersion").oneOf(Version),
			RunnerID:           o.key("runnerId").nonEmpty(),
			Sites:              record(o.key("sites"), readIdentity),
			ControlPlanePublic: optionalText(o, "controlPlanePublic"),
		}
	})
}

// DecodePairStartResponse reads the answer to a device-code start.
func DecodePairStartResponse(body []byte) (PairStartResponse, error) {
	return decode(answers, body, "pair/start response", func(n node) PairStartResponse {
		o := n.strict("deviceCode", "userCode", "verificationUrl", "expiresAt", "pollIntervalMs")
		return PairStartResponse{
			DeviceCode:      o.key("deviceCode").sized(MinDeviceCode, -1),
			UserCode:        o.key("userCode").sized(4, 16),
			VerificationURL: readURL(o.key("verificationUrl")),
			ExpiresAt:       o.key("expiresAt").positive(),
			PollIntervalMs:  o.key("pollIntervalMs").integer(500, 60_000),
		}
	})
}

// readURL reads an absolute URL. zod's z.url() takes whatever WHATWG
// new URL() takes; Go's parser is close enough for a test client: it must
// parse and name a scheme, so "not a url" fails and "mailto:x" passes.
func readURL(n node) string {
	s := n.nonEmpty()
	if n.failed() {
		return ""
	}
	if u, err := url.Parse(s); err != nil || u.Scheme == "" {
		n.refuse(fmt.Errorf("%w: not an absolute URL", protocol.ErrNotAllowed))
		return ""
	}
	return s
}

// DecodePairPollResponse reads the answer to a device-code poll: one of
// four strict shapes chosen by status.
func DecodePairPollResponse(body []byte) (PairPollResponse, error) {
	return decode(answers, body, "pair/poll response", func(n node) PairPollResponse {
		status := n.strict("status", "runnerId", "owner", "ownerLabel", "sites", "controlPlanePublic").
			key("status").oneOf(PollPending, PollDenied, PollExpired, PollApproved)
		if status != PollApproved {
			n.strict("status")
			return PairPollResponse{Status: status}
		}
		o := n.strict("status", "runnerId", "owner", "ownerLabel", "sites", "controlPlanePublic")
		var label *string
		if o.has("ownerLabel") {
			s, _ := o.key("ownerLabel").text()
			label = &s
		}
		sites := record(o.key("sites"), readIdentity)
		return PairPollResponse{
			Status:             status,
			RunnerID:           o.key("runnerId").nonEmpty(),
			Owner:              o.key("owner").nonEmpty(),
			OwnerLabel:         label,
			Sites:              &sites,
			ControlPlanePublic: optionalText(o, "controlPlanePublic"),
		}
	})
}

// DecodeClaimResponse reads the answer to a claim: every stub strict, with
// a strict lease and an optional grant.
func DecodeClaimResponse(body []byte) (ClaimResponse, error) {
	return decode(answers, body, "claim response", func(n node) ClaimResponse {
		o := n.strict("jobs", "leaseMs")
		return ClaimResponse{
			Jobs:    each(o.key("jobs"), 0, readClaimedStub),
			LeaseMs: o.key("leaseMs").positive(),
		}
	})
}

func readClaimedStub(n node) ClaimedStub {
	o := n.strict("id", "kind", "owner", "site", "audience", "purpose", "sizeClass", "streaming", "deadlineAt", "lease", "grant")
	var grant *SignedGrant
	if o.has("grant") {
		g := readGrant(o.key("grant"))
		grant = &g
	}
	return ClaimedStub{JobStub: readStub(stubOnly(o)), Lease: readLease(o.key("lease")), Grant: grant}
}

// stubOnly is a claimed stub without its lease and grant, for the JobStub
// reader's strict check.
func stubOnly(n node) node {
	if n.failed() {
		return n
	}
	out := n
	out.v.Members = nil
	for _, m := range n.v.Members {
		if m.Key != "lease" && m.Key != "grant" {
			out.v.Members = append(out.v.Members, m)
		}
	}
	return out
}

// DecodeFetchResponse reads the answer to a fetch.
func DecodeFetchResponse(body []byte) (FetchResponse, error) {
	return decode(answers, body, "fetch response", func(n node) FetchResponse {
		return FetchResponse{Envelope: readEnvelope(n.strict("envelope").key("envelope"))}
	})
}

// DecodeResultResponse reads the answer to a result.
func DecodeResultResponse(body []byte) (ResultResponse, error) {
	return decode(answers, body, "result response", func(n node) ResultResponse {
		o := n.strict("accepted", "duplicate", "state")
		duplicate := false
		if o.has("duplicate") {
			duplicate = o.key("duplicate").boolean()
		}
		return ResultResponse{Accepted: o.key("accepted").boolean(), Duplicate: duplicate, State: o.key("state").nonEmpty()}
	})
}

// DecodeHeartbeatResponse reads the answer to a heartbeat. An extra key,
// such as "0"'s revoked, fails it, as it fails every 0.1.1 daemon.
func DecodeHeartbeatResponse(body []byte) (HeartbeatResponse, error) {
	return decode(answers, body, "heartbeat response", func(n node) HeartbeatResponse {
		o := n.strict("sites", "successions", "cancel", "lost", "serverTime", "awaitingConsent", "updateTo")
		var successions Keyed[SiteSuccession]
		if o.has("successions") {
			successions = record(o.key("successions"), readSiteSuccession)
		}
		return HeartbeatResponse{
			Sites:           record(o.key("sites"), readIdentity),
			Successions:     successions,
			UpdateTo:        optionalText(o, "updateTo"),
			AwaitingConsent: each(o.key("awaitingConsent"), 0, node.nonEmpty),
			Cancel:          each(o.key("cancel"), 0, readGrantRef),
			Lost:            each(o.key("lost"), 0, readGrantRef),
			ServerTime:      o.key("serverTime").positive(),
		}
	})
}

func readSiteSuccession(n node) SiteSuccession {
	o := n.strict("succeeds", "retiringUntil")
	succeeds := o.key("succeeds")
	if !succeeds.failed() && len(succeeds.v.Items) > MaxSuccessionChain {
		succeeds.refuse(fmt.Errorf("%w: more than %d successions", protocol.ErrOutOfRange, MaxSuccessionChain))
	}
	var retiring int64
	if o.has("retiringUntil") {
		retiring = o.key("retiringUntil").positive()
	}
	return SiteSuccession{Succeeds: each(succeeds, 0, readSuccession), RetiringUntil: retiring}
}

// DecodeReleaseResponse reads the answer to a release.
func DecodeReleaseResponse(body []byte) (ReleaseResponse, error) {
	return decode(answers, body, "release response", func(n node) ReleaseResponse {
		return ReleaseResponse{Released: each(n.strict("released").key("released"), 0, node.nonEmpty)}
	})
}

// optionalText reads an optional non-empty string member; absent is "".
func optionalText(o node, key string) string {
	if !o.has(key) {
		return ""
	}
	return o.key(key).nonEmpty()
}
