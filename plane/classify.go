package plane

import (
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

// newClassifier returns the classifier of a relay speaking the protocols
// served names.
func newClassifier(env *codec.Env, served Protocols, v2 codec2.Options) classifier {
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
func (k classifier) classify(plane codec.Plane, body *protocol.Body, rawQuery string) (codec.Codec, error) {
	if k.v2 == nil {
		return k.classifyV0(plane, body)
	}
	rule := k.rules.Daemon
	if plane == codec.Site {
		rule = k.rules.Site
	}
	which, refusal := rule(k.decoder.DeclaredVersion(body.Raw(), rawQuery))
	if refusal != nil {
		return nil, refusal
	}
	if which == proto2.CodecV0 {
		return k.v0, nil
	}
	return k.v2, nil
}

// classifyV0 is the classifier of a relay speaking protocol "0" alone,
// exactly as relayd answered before protocol "2".
//
// On the daemon plane a body that declares any other version, a non-string
// included, is refused before its signature is checked (G4); one that
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
