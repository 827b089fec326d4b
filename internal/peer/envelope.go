package peer

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync"

	"golang.org/x/crypto/nacl/box"

	"github.com/byollm/relayd/protocol"
)

// EnvelopeVersion is the "v" tag that opens every signed envelope body.
const EnvelopeVersion = "byollm/v1/envelope"

// Seal encrypts plaintext for job jobID from sender to recipient, as
// crypto.md describes: a signed body S, wrapped with its signature in an
// inner JSON object, in a libsodium sealed box to the recipient's X25519 key.
//
// direction is protocol.DirectionPayload (site to device) or
// protocol.DirectionResult (device to site). plaintext must be valid JSON; it
// is compacted (whitespace only, nothing else changes) and embedded in S as
// raw JSON, which is the byte layout a JavaScript peer's JSON.stringify gives.
// The recipient's identity must be consistent: sealing to an encryption key
// its identity key never vouched for would hand the payload to whoever
// substituted it.
func Seal(sender Keys, recipient protocol.PublicIdentity, jobID, direction string, deadlineAt int64, plaintext json.RawMessage) (protocol.SealedEnvelope, error) {
	return seal(sender, recipient, protocol.PublicIdentity.IsConsistent, jobID, direction, deadlineAt, plaintext)
}

// Sealer seals like Seal but checks each recipient's identity only once:
// the check depends on nothing but the identity's three keys and costs a
// signature verification, and a peer seals to the same few devices over
// and over. Identities that fail are checked again every time. The zero
// value is ready, and safe for concurrent use.
type Sealer struct {
	mu      sync.Mutex
	checked map[protocol.PublicIdentity]struct{}
}

// sealerCapacity bounds what a Sealer remembers; past it, it starts over.
const sealerCapacity = 4096

// Seal is Seal with the recipient's check remembered.
func (s *Sealer) Seal(sender Keys, recipient protocol.PublicIdentity, jobID, direction string, deadlineAt int64, plaintext json.RawMessage) (protocol.SealedEnvelope, error) {
	return seal(sender, recipient, s.consistent, jobID, direction, deadlineAt, plaintext)
}

func (s *Sealer) consistent(p protocol.PublicIdentity) bool {
	s.mu.Lock()
	_, ok := s.checked[p]
	s.mu.Unlock()
	if ok {
		return true
	}
	if !p.IsConsistent() {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.checked == nil || len(s.checked) >= sealerCapacity {
		s.checked = map[protocol.PublicIdentity]struct{}{}
	}
	s.checked[p] = struct{}{}
	return true
}

func seal(sender Keys, recipient protocol.PublicIdentity, consistent func(protocol.PublicIdentity) bool,
	jobID, direction string, deadlineAt int64, plaintext json.RawMessage) (protocol.SealedEnvelope, error) {
	if jobID == "" {
		return protocol.SealedEnvelope{}, errors.New("seal: job id is empty")
	}
	if direction != protocol.DirectionPayload && direction != protocol.DirectionResult {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: direction %q is neither payload nor result", direction)
	}
	if deadlineAt <= 0 {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: deadlineAt %d is not positive", deadlineAt)
	}
	if !consistent(recipient) {
		return protocol.SealedEnvelope{}, errors.New("seal: recipient identity is not consistent")
	}
	recipientID, ok := protocol.KeyIDOf(recipient.Identity)
	if !ok {
		return protocol.SealedEnvelope{}, errors.New("seal: recipient identity key is not base64url")
	}
	encPub, err := decodeKey32(recipient.Encryption)
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: recipient encryption key: %w", err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, plaintext); err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: plaintext is not JSON: %w", err)
	}

	env := protocol.SealedEnvelope{
		RecipientKeyID: recipientID,
		SenderKeyID:    sender.KeyID(),
		Direction:      direction,
		DeadlineAt:     deadlineAt,
	}
	body, err := signedBody(jobID, env, compact.Bytes())
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: %w", err)
	}
	inner, err := json.Marshal(innerEnvelope{
		Body:      protocol.EncodeKey(body),
		Signature: protocol.EncodeKey(ed25519.Sign(sender.identity, body)),
	})
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: encode inner: %w", err)
	}
	boxed, err := box.SealAnonymous(nil, inner, &encPub, rand.Reader)
	if err != nil {
		return protocol.SealedEnvelope{}, fmt.Errorf("seal: sealed box: %w", err)
	}
	env.Ciphertext = protocol.EncodeKey(boxed)
	return env, nil
}

// innerEnvelope is what the sealed box holds. Field order matches crypto.md.
type innerEnvelope struct {
	Body      string `json:"body"`
	Signature string `json:"signature"`
}

// signedBody writes S by hand, because its key order is part of the format
// and plaintext goes in as raw JSON rather than as an encoded string.
func signedBody(jobID string, env protocol.SealedEnvelope, plaintext []byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"v":`)
	if err := writeJSONString(&b, EnvelopeVersion); err != nil {
		return nil, err
	}
	b.WriteString(`,"jobId":`)
	if err := writeJSONString(&b, jobID); err != nil {
		return nil, err
	}
	b.WriteString(`,"senderKeyId":`)
	if err := writeJSONString(&b, env.SenderKeyID); err != nil {
		return nil, err
	}
	b.WriteString(`,"recipientKeyId":`)
	if err := writeJSONString(&b, env.RecipientKeyID); err != nil {
		return nil, err
	}
	b.WriteString(`,"deadlineAt":`)
	b.WriteString(strconv.FormatInt(env.DeadlineAt, 10))
	b.WriteString(`,"direction":`)
	if err := writeJSONString(&b, env.Direction); err != nil {
		return nil, err
	}
	b.WriteString(`,"plaintext":`)
	b.Write(plaintext)
	b.WriteByte('}')
	return b.Bytes(), nil
}

// writeJSONString appends s as a JSON string without Go's HTML escaping of
// <, > and &, which JSON.stringify does not do either.
func writeJSONString(b *bytes.Buffer, s string) error {
	var tmp bytes.Buffer
	enc := json.NewEncoder(&tmp)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return fmt.Errorf("encode string: %w", err)
	}
	b.Write(bytes.TrimSuffix(tmp.Bytes(), []byte("\n")))
	return nil
}

// Expectation is what an opener knows before it opens an envelope: which job
// it is for, which way it travels, and the sender's identity key, pinned from
// a source the opener trusts (the pair response for a daemon; the device
// record for a site). Every field is required.
type Expectation struct {
	JobID     string
	Direction string
	// SenderIdentity is the sender's Ed25519 identity key as it travels
	// (unpadded base64url).
	SenderIdentity string
}

// signedClaims is S as decoded. Plaintext stays raw so the caller gets the
// bytes the sender signed.
type signedClaims struct {
	V              string          `json:"v"`
	JobID          string          `json:"jobId"`
	SenderKeyID    string          `json:"senderKeyId"`
	RecipientKeyID string          `json:"recipientKeyId"`
	DeadlineAt     int64           `json:"deadlineAt"`
	Direction      string          `json:"direction"`
	Plaintext      json.RawMessage `json:"plaintext"`
}

// Open decrypts an envelope sealed to recipient and returns its plaintext.
// It refuses, before decrypting, an envelope whose recipient key id is not
// the recipient's, whose sender key id is not the pinned key's, or whose
// direction is not the expected one; and, after decrypting, one whose
// signature does not verify against the pinned identity key or whose signed
// claims (version, job id, key ids, deadline, direction) differ from the
// expectation or from the envelope's clear-text fields.
func Open(recipient Keys, env protocol.SealedEnvelope, expect Expectation) (json.RawMessage, error) {
	if expect.JobID == "" || expect.Direction == "" || expect.SenderIdentity == "" {
		return nil, errors.New("open: expectation needs a job id, a direction and a pinned sender identity")
	}
	pinned, err := decodeKey32(expect.SenderIdentity)
	if err != nil {
		return nil, fmt.Errorf("open: pinned sender identity: %w", err)
	}
	pinnedID := protocol.KeyID(pinned[:])
	if env.RecipientKeyID != recipient.KeyID() {
		return nil, fmt.Errorf("open: envelope is for %s, not this peer (%s)", env.RecipientKeyID, recipient.KeyID())
	}
	if env.SenderKeyID != pinnedID {
		return nil, fmt.Errorf("open: envelope claims sender %s, pinned sender is %s", env.SenderKeyID, pinnedID)
	}
	if env.Direction != expect.Direction {
		return nil, fmt.Errorf("open: envelope direction %q, expected %q", env.Direction, expect.Direction)
	}

	boxed, err := protocol.DecodeKey(env.Ciphertext)
	if err != nil {
		return nil, fmt.Errorf("open: ciphertext is not base64url: %w", err)
	}
	innerJSON, ok := box.OpenAnonymous(nil, boxed, &recipient.encryptionPub, &recipient.encryption)
	if !ok {
		return nil, errors.New("open: sealed box does not open with this peer's key")
	}
	var inner innerEnvelope
	if err := strictUnmarshal(innerJSON, &inner); err != nil {
		return nil, fmt.Errorf("open: inner envelope: %w", err)
	}
	body, err := protocol.DecodeKey(inner.Body)
	if err != nil {
		return nil, fmt.Errorf("open: inner body is not base64url: %w", err)
	}
	sig, err := protocol.DecodeKey(inner.Signature)
	if err != nil {
		return nil, fmt.Errorf("open: inner signature is not base64url: %w", err)
	}
	// Verify before parsing: nothing in an unsigned body deserves attention.
	if len(sig) != ed25519.SignatureSize || !ed25519.Verify(ed25519.PublicKey(pinned[:]), body, sig) {
		return nil, errors.New("open: signature does not verify against the pinned sender identity")
	}

	var s signedClaims
	if err := strictUnmarshal(body, &s); err != nil {
		return nil, fmt.Errorf("open: signed body: %w", err)
	}
	switch {
	case s.V != EnvelopeVersion:
		return nil, fmt.Errorf("open: signed body has version %q, want %q", s.V, EnvelopeVersion)
	case s.JobID != expect.JobID:
		return nil, fmt.Errorf("open: signed for job %q, expected %q", s.JobID, expect.JobID)
	case s.SenderKeyID != env.SenderKeyID:
		return nil, fmt.Errorf("open: signed sender %s differs from the envelope's %s", s.SenderKeyID, env.SenderKeyID)
	case s.RecipientKeyID != env.RecipientKeyID:
		return nil, fmt.Errorf("open: signed recipient %s differs from the envelope's %s", s.RecipientKeyID, env.RecipientKeyID)
	case s.DeadlineAt != env.DeadlineAt:
		return nil, fmt.Errorf("open: signed deadline %d differs from the envelope's %d", s.DeadlineAt, env.DeadlineAt)
	case s.Direction != env.Direction:
		return nil, fmt.Errorf("open: signed direction %q differs from the envelope's %q", s.Direction, env.Direction)
	case len(s.Plaintext) == 0:
		return nil, errors.New("open: signed body has no plaintext")
	}
	return s.Plaintext, nil
}

// strictUnmarshal decodes exactly one JSON value with no unknown fields.
func strictUnmarshal(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// decodeKey32 decodes an unpadded base64url 32-byte key.
func decodeKey32(s string) ([32]byte, error) {
	var k [32]byte
	raw, err := protocol.DecodeKey(s)
	if err != nil {
		return k, fmt.Errorf("not base64url: %w", err)
	}
	if len(raw) != len(k) {
		return k, fmt.Errorf("%d bytes, want %d", len(raw), len(k))
	}
	copy(k[:], raw)
	return k, nil
}
