package proto2

// Codec names the protocol whose rules serve one request.
type Codec int

// The codecs a request can be given to.
const (
	CodecV0 Codec = iota + 1
	CodecV2
)

// String names the codec by its protocol version.
func (c Codec) String() string {
	switch c {
	case CodecV0:
		return "0"
	case CodecV2:
		return Version
	}
	return "none"
}

// Classifier chooses, per request, the codec that serves it from the
// version it declared (§2.4.1, decisions P2-D9 and P2-A1–P2-A10). It runs where the
// reference runs its handshake: after the debug route and after the body
// is read, before routing, schemas and signatures. It is for a relay that
// serves "2"; a relay serving "0" alone keeps package protocol's own
// version check (design RB-G4).
type Classifier struct {
	// WithV0 is true when the relay serves "0" beside "2" (--protocols
	// 0,2). Without it the relay answers as the reference does.
	WithV0 bool
}

// Supported lists the versions served, lowest first, as the refusal's
// supported field says them.
func (c Classifier) Supported() []string {
	if c.WithV0 {
		return []string{"0", Version}
	}
	return []string{Version}
}

// Daemon classifies a request to a daemon-plane endpoint (pair, claim,
// fetch, result, heartbeat, release under the base path). A missing or
// malformed version is refused, since neither published daemon omits it
// (P2-A1); an unreadable body goes to the codec that will refuse it after
// authentication, "0"'s when it is served, so "0" answers as it does today.
func (c Classifier) Daemon(d Declaration) (Codec, *Refusal) {
	switch {
	case d.Kind == Declared && d.Version == Version:
		return CodecV2, nil
	case d.Kind == Declared && d.Version == "0" && c.WithV0:
		return CodecV0, nil
	case d.Kind == Unreadable:
		return c.lowest(), nil
	}
	return 0, UnsupportedVersion(c.Supported(), d)
}

// Site classifies a request to one of the five /relay/site/* paths. There
// a missing version means "0" when it is served, because sites of the "0"
// generation never declare one. A declared "0" is served by the "0" codec
// too (P2-A2); that codec must drop the protocolVersion key before its strict
// schema runs.
func (c Classifier) Site(d Declaration) (Codec, *Refusal) {
	switch {
	case d.Kind == Declared && d.Version == Version:
		return CodecV2, nil
	case c.WithV0 && (d.Kind == Undeclared || (d.Kind == Declared && d.Version == "0")):
		return CodecV0, nil
	case d.Kind == Unreadable:
		return c.lowest(), nil
	}
	return 0, UnsupportedVersion(c.Supported(), d)
}

func (c Classifier) lowest() Codec {
	if c.WithV0 {
		return CodecV0
	}
	return CodecV2
}
