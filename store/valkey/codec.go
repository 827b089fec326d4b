package valkey

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// frame joins strings as <length>:<bytes>..., the framing the scripts use
// for records and remembered answers.
func frame(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

var errBadFrame = errors.New("malformed framed value")

// anySite is the Sites argument that restricts nothing (served_sites).
const anySite = "*"

// sitesArg is a call's Sites as its script reads them (served_sites):
// anySite for nil, else the framed ids, so that an empty list refuses
// every job.
func sitesArg(sites []string) string {
	if sites == nil {
		return anySite
	}
	return frame(sites...)
}

// unframe splits a framed string.
func unframe(raw string) ([]string, error) {
	out := []string{}
	for len(raw) > 0 {
		colon := strings.IndexByte(raw, ':')
		if colon <= 0 || colon > 10 {
			return nil, errBadFrame
		}
		n, err := strconv.Atoi(raw[:colon])
		if err != nil || n < 0 || colon+1+n > len(raw) {
			return nil, errBadFrame
		}
		out = append(out, raw[colon+1:colon+1+n])
		raw = raw[colon+1+n:]
	}
	return out, nil
}

// errUnreadable marks a record in a format this code does not read.
var errUnreadable = errors.New("record is not in a format this relay reads")

// decodeJob builds a store.Job from its stored parts. A stub that no longer
// decodes is reported as far as it goes (reads show what is stored; a
// claim never hands such a job out), but an unreadable record is an error.
func decodeJob(id, raw string, payload, result *string) (store.Job, error) {
	f, err := unframe(raw)
	if err != nil || len(f) < jobFields || f[fieldVersion] != recordFormat {
		return store.Job{}, fmt.Errorf("job %q: %w", id, errUnreadable)
	}
	j := store.Job{
		ID:          id,
		SiteID:      f[fieldSite],
		State:       store.State(f[fieldState]),
		RefusedBy:   append([]string{}, f[jobFields:]...),
		Cancelled:   f[fieldCancelled] == "1",
		Disposition: f[fieldDisp],
	}
	if j.Proto, err = decodeProto(f[fieldProto]); err != nil {
		return store.Job{}, fmt.Errorf("job %q: %w", id, err)
	}
	if err := decodeBookkeeping(&j, f); err != nil {
		return store.Job{}, fmt.Errorf("job %q: %w", id, err)
	}
	if err := json.Unmarshal([]byte(f[fieldStub]), &j.Stub); err != nil {
		j.Stub = protocol.JobStub{ID: id}
	}
	if f[fieldAwaiting] != "" {
		if j.AwaitingUntil, err = strconv.ParseInt(f[fieldAwaiting], 10, 64); err != nil {
			return store.Job{}, fmt.Errorf("job %q: awaiting-until: %w", id, err)
		}
	}
	if f[fieldRunner] != "" {
		c := &store.Claim{RunnerID: f[fieldRunner], Owner: f[fieldClaimOwner], LeaseID: f[fieldLease]}
		if c.LeaseExpiresAt, err = strconv.ParseInt(f[fieldLeaseExpiry], 10, 64); err != nil {
			return store.Job{}, fmt.Errorf("job %q: lease expiry: %w", id, err)
		}
		if err := json.Unmarshal([]byte(f[fieldDevice]), &c.Device); err != nil {
			return store.Job{}, fmt.Errorf("job %q: device: %w", id, err)
		}
		j.ClaimedBy = c
	}
	if payload != nil {
		j.Payload = new(protocol.SealedEnvelope)
		if err := json.Unmarshal([]byte(*payload), j.Payload); err != nil {
			return store.Job{}, fmt.Errorf("job %q: payload: %w", id, err)
		}
	}
	if result != nil {
		j.Result = new(protocol.SealedEnvelope)
		if err := json.Unmarshal([]byte(*result), j.Result); err != nil {
			return store.Job{}, fmt.Errorf("job %q: result: %w", id, err)
		}
	}
	return j, nil
}

// decodeProto reads a record's protocol tag.
func decodeProto(s string) (store.Proto, error) {
	switch s {
	case "0":
		return store.Proto0, nil
	case "2":
		return store.Proto2, nil
	}
	return 0, fmt.Errorf("protocol tag %q: %w", s, errUnreadable)
}

// decodeBookkeeping reads the proto-2 sealing-window fields and the
// not-before times (empty where unset).
func decodeBookkeeping(j *store.Job, f []string) error {
	attempts, err := optionalInt(f[fieldSealAttempts])
	if err != nil {
		return fmt.Errorf("seal attempts: %w", err)
	}
	j.SealAttempts = int(attempts)
	j.ReofferTo = f[fieldReofferTo]
	if j.ReofferUntil, err = optionalInt(f[fieldReofferUntil]); err != nil {
		return fmt.Errorf("re-offer until: %w", err)
	}
	if f[fieldRetryAfter] == "" {
		return nil
	}
	pairs, err := unframe(f[fieldRetryAfter])
	if err != nil || len(pairs)%2 != 0 {
		return fmt.Errorf("not-before times: %w", errBadFrame)
	}
	j.RetryAfter = map[string]int64{}
	for i := 0; i < len(pairs); i += 2 {
		at, err := strconv.ParseInt(pairs[i+1], 10, 64)
		if err != nil {
			return fmt.Errorf("not-before time: %w", err)
		}
		j.RetryAfter[pairs[i]] = at
	}
	return nil
}

// optionalInt reads an integer field, empty standing for zero.
func optionalInt(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// decodePresence builds a store.Presence from its stored record.
func decodePresence(runner, raw string) (store.Presence, error) {
	f, err := unframe(raw)
	if err != nil || len(f) < presenceRequired || f[presenceVersion] != presenceFormat {
		return store.Presence{}, fmt.Errorf("presence %q: %w", runner, errUnreadable)
	}
	p := store.Presence{RunnerID: runner, Owner: f[presenceOwner]}
	if err := json.Unmarshal([]byte(f[presenceDevice]), &p.Device); err != nil {
		return store.Presence{}, fmt.Errorf("presence %q: device: %w", runner, err)
	}
	if p.LastSeenAt, err = strconv.ParseInt(f[presenceSeen], 10, 64); err != nil {
		return store.Presence{}, fmt.Errorf("presence %q: last seen: %w", runner, err)
	}
	if len(f) > presenceWithheld {
		p.Capabilities = rawOrNil(f[presenceCapabilities])
		p.Withheld = rawOrNil(f[presenceWithheld])
	}
	return p, nil
}

// rawOrNil reads stored JSON, "" standing for never said.
func rawOrNil(s string) json.RawMessage {
	if s == "" {
		return nil
	}
	return json.RawMessage(s)
}
