package plane

import (
	"bytes"
	"encoding/json"
	"io"

	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/plane/codec0"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/protocol/proto2"
)

// classifier picks each request's codec from the protocol version it
// declares, where the reference runs its handshake: after the body is
// read, before any signature or schema (protocol-2.md §2.4.1). It is the
// one place that knows which versions the relay speaks.
type classifier struct {
	// v0 and v2 serve their protocols; either is nil when not served.
	v0, v2 codec.Codec
	// rules are protocol "2"'s classification rules (§2.4.1), used
	// whenever "2" is served; a relay of "0" alone keeps its own check.
	rules   proto2.Classifier
	decoder proto2.Decoder
}

// Protocols says which wire protocols a relay serves. The zero value
// serves "0" alone, as relayd did before "2".
type Protocols struct {
	V0, V2 bool
}

// newClassifier returns the classifier of the relay cfg configures: the
// protocols it serves ("0" alone when it names none), each codec built
// on env, protocol "2"'s with its settings, whose list limit is the
// relay's own unless they set one.
func newClassifier(env *codec.Env, cfg Config) classifier {
	served, v2 := cfg.Protocols, cfg.V2
	if !served.V0 && !served.V2 {
		served.V0 = true
	}
	if v2.Limits.MaxListItems <= 0 {
		v2.Limits.MaxListItems = cfg.Limits.MaxListItems
	}
	k := classifier{rules: proto2.Classifier{WithV0: served.V0}, decoder: proto2.Decoder{Limits: v2.Limits}}
	if served.V0 {
		k.v0 = codec0.New(env)
	}
	if served.V2 {
		k.v2 = codec2.New(env, v2)
	}
	return k
}

// classify returns the codec for a request to plane, or the refusal of a
// version the relay does not speak. Either way no signature has been
// checked yet, which is what lets an unsupported version be named as such
// on both planes (the posture audit's D011).
//
// A site request that declares "0" goes to the "0" codec, whose strict
// site schemas have no protocolVersion key (P2-A2): classify then returns the
// body that schema reads, the key removed, while the signature still
// covers the body as sent.
func (k classifier) classify(plane codec.Plane, body *protocol.Body, rawQuery string) (codec.Codec, []byte, error) {
	if k.v2 == nil {
		c, err := k.classifyV0(plane, body)
		return c, nil, err
	}
	rule := k.rules.Daemon
	if plane == codec.Site {
		rule = k.rules.Site
	}
	decl := k.declared(plane, body, rawQuery)
	which, refusal := rule(decl)
	if refusal != nil {
		return nil, nil, refusal
	}
	if which == proto2.CodecV2 {
		return k.v2, nil, nil
	}
	if plane == codec.Site && decl.Kind == proto2.Declared {
		if stripped, ok := withoutMember(body.Raw(), "protocolVersion"); ok {
			return k.v0, stripped, nil
		}
	}
	return k.v0, nil, nil
}

// declared is what the request declares, as proto2.DeclaredVersion reads
// it, from the body's one parse whenever that settles it: protocol "0"'s
// codec decodes that same parse, so a "0" request, payloads included, is
// parsed once. Only a body that parsed to no declaration is read again,
// where the difference between an unreadable body and one that is not
// JSON at all can change the answer.
func (k classifier) declared(plane codec.Plane, body *protocol.Body, rawQuery string) proto2.Declaration {
	if version, present := body.ProtocolVersion(); present {
		if version == "" {
			// Not a string, or the empty one.
			return proto2.Declaration{Kind: proto2.NotAString}
		}
		return proto2.Declaration{Kind: proto2.Declared, Version: version}
	}
	if _, inQuery := proto2.FirstQueryValue(rawQuery, "protocolVersion"); !inQuery && plane == codec.Site && k.v0 != nil {
		// Undeclared or unreadable, a site request goes to "0" alike.
		return proto2.Declaration{Kind: proto2.Undeclared}
	}
	return k.decoder.DeclaredVersion(body.Raw(), rawQuery)
}

// withoutMember returns the JSON object raw with its top-level members
// named key removed, every other byte of every other member as sent. It
// reports false when raw is not one readable object, which the schema
// will refuse as it stands.
func withoutMember(raw []byte, key string) ([]byte, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, false
	}
	kept := [][]byte{}
	for dec.More() {
		start := dec.InputOffset()
		tok, err := dec.Token()
		name, isKey := tok.(string)
		if err != nil || !isKey {
			return nil, false
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, false
		}
		if name != key {
			// The member's text, without the comma and space before it.
			kept = append(kept, bytes.TrimLeft(raw[start:dec.InputOffset()], ", \t\r\n"))
		}
	}
	if tok, err := dec.Token(); err != nil || tok != json.Delim('}') {
		return nil, false
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false
	}
	return append(append([]byte("{"), bytes.Join(kept, []byte(","))...), '}'), true
}

// classifyV0 is the classifier of a relay speaking protocol "0" alone,
// exactly as relayd answered before protocol "2".
//
// On the daemon plane a body that declares any other version, a non-string
// included, is refused before its signature is checked (RB-G4); one that
// declares none goes on to fail protocol "0"'s schema in the usual order.
// Protocol "0" sites never declare a version, and relayd reads none on the
// site plane: every site request goes to the "0" codec.
func (k classifier) classifyV0(plane codec.Plane, body *protocol.Body) (codec.Codec, error) {
	if plane == codec.Site {
		return k.v0, nil
	}
	version, declared := body.ProtocolVersion()
	if !declared || version == protocol.Version {
		return k.v0, nil
	}
	return nil, protocol.UnsupportedVersion()
}
