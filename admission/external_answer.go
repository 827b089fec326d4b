package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
)

// decide reads an author's 200 answer, which must be exactly the
// reference GrantDecision (G-R36): {"granted": <SignedGrant>} or
// {"declined": {"permanent": bool, "reason"?: string}}. Anything else is
// author-unavailable (G-R38); a grant the device would refuse is
// author-invalid (G-R37).
func (e *External) decide(ctx context.Context, c Claim, grantKey projection.GrantKey, answer []byte, now time.Time) Outcome {
	var top map[string]json.RawMessage
	if err := strictJSON(answer, &top); err != nil || len(top) != 1 {
		return e.unavailable(ctx, c, "read the answer", errors.New(`not exactly {"granted"} or {"declined"}`))
	}
	if raw, ok := top["granted"]; ok {
		return e.granted(ctx, c, grantKey, raw, now)
	}
	raw, ok := top["declined"]
	if !ok {
		return e.unavailable(ctx, c, "read the answer", errors.New(`not exactly {"granted"} or {"declined"}`))
	}
	d, err := readDecline(raw)
	if err != nil {
		return e.unavailable(ctx, c, "read the decline", err)
	}
	return Outcome{Decision: d}
}

// readDecline reads {"permanent": bool, "reason"?: string}; the
// author's permanence is trusted as its decision (G-R38).
func readDecline(raw json.RawMessage) (Decision, error) {
	var fields map[string]json.RawMessage
	if err := strictJSON(raw, &fields); err != nil || fields == nil {
		return Decision{}, errors.New("the decline is not an object")
	}
	var d Decision
	for name, v := range fields {
		var err error
		switch name {
		case "permanent":
			err = strictJSON(v, &d.permanent)
		case "reason":
			var reason string
			err = strictJSON(v, &reason)
			d.Reason = Reason(reason)
		default:
			return Decision{}, errors.New("the decline has a key besides permanent and reason")
		}
		if err != nil || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			return Decision{}, errors.New("the decline's " + name + " has the wrong type")
		}
	}
	if _, ok := fields["permanent"]; !ok {
		return Decision{}, errors.New("the decline has no boolean permanent")
	}
	d.authored = true
	return d, nil
}

// granted checks a returned grant as the device will (G-R37) and answers
// it re-encoded from relayd's own struct, so that no extra key reaches the
// daemon's strict parser.
func (e *External) granted(ctx context.Context, c Claim, grantKey projection.GrantKey, raw json.RawMessage, now time.Time) Outcome {
	var g proto2.SignedGrant
	if err := strictJSON(raw, &g); err != nil {
		return e.invalid(ctx, c, "not exactly a SignedGrant")
	}
	if why := check(c, grantKey, g, now); why != "" {
		return e.invalid(ctx, c, why)
	}
	return Outcome{Decision: Decision{Granted: true, Terms: Terms{
		JobID: g.JobID, Site: g.Site, User: g.User, Owner: g.Owner, Purpose: g.Purpose, Kind: g.Kind, Service: g.Service,
	}}, Grant: &g}
}

// check is why the device would refuse g for c, or "" (G-R34's checks 4
// to 8, the signature over relayd's own encoding, issuedAt around now, the
// service).
func check(c Claim, grantKey projection.GrantKey, g proto2.SignedGrant, now time.Time) string {
	stub := c.Stub
	purpose := stub.Purpose
	if purpose == "" {
		purpose = defaultPurpose
	}
	for _, f := range []struct{ name, got, want string }{
		{"jobId", g.JobID, stub.ID}, {"site", g.Site, stub.Site}, {"user", g.User, stub.Owner},
		{"owner", g.Owner, c.DeviceOwner}, {"kind", g.Kind, stub.Kind}, {"purpose", g.Purpose, purpose},
	} {
		if f.got != f.want {
			return "the grant's " + f.name + " is not the job's"
		}
	}
	if err := ClaimsOf(g).Validate(); err != nil {
		return "the grant's claims are not valid"
	}
	if !Verify(grantKey.String(), g) {
		return "the signature does not verify with the device's grant key"
	}
	issued := time.UnixMilli(g.IssuedAt)
	if issued.Before(now.Add(-authorIssuedBehind)) || issued.After(now.Add(authorIssuedAhead)) {
		return "issuedAt is outside [now - 60s, now + 5s]"
	}
	if !offers(c.Capabilities, stub.Kind, g.Service, stub.Owner == c.DeviceOwner) {
		return "the service is not one this claim offers for the job"
	}
	return ""
}

// strictJSON decodes exactly one JSON value into v, refusing unknown
// object keys and anything after the value.
func strictJSON(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("data after the JSON value")
	}
	return nil
}
