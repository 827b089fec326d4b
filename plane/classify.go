package plane

import (
	"github.com/byollm/relayd/plane/codec"
	"github.com/byollm/relayd/plane/codec0"
	"github.com/byollm/relayd/protocol"
)

// classifier picks each request's codec from the protocol version it
// declares, where the reference runs its handshake: after the body is
// read, before any signature or schema (protocol-2.md §2.4.1). It is the
// one place that knows which versions the relay speaks; serving another
// adds a codec here and touches no codec already served.
type classifier struct {
	// undeclared serves requests that declare no version.
	undeclared codec.Codec
	// byVersion serves requests that declare one.
	byVersion map[string]codec.Codec
}

// newClassifier returns the classifier of a relay speaking protocol "0".
func newClassifier(env *codec.Env) classifier {
	v0 := codec0.New(env)
	return classifier{undeclared: v0, byVersion: map[string]codec.Codec{protocol.Version: v0}}
}

// classify returns the codec for a request to plane, or the refusal of a
// version the relay does not speak.
//
// On the daemon plane a body that declares any other version, a non-string
// included, is refused before its signature is checked (G4); one that
// declares none goes on to fail protocol "0"'s schema in the usual order.
// Protocol "0" sites never declare a version, and relayd reads none on the
// site plane: every site request goes to the undeclared codec.
func (k classifier) classify(plane codec.Plane, body *protocol.Body) (codec.Codec, error) {
	if plane == codec.Site {
		return k.undeclared, nil
	}
	version, declared := body.ProtocolVersion()
	if !declared {
		return k.undeclared, nil
	}
	if c, ok := k.byVersion[version]; ok {
		return c, nil
	}
	return nil, protocol.UnsupportedVersion()
}
