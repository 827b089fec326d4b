package proto2

import (
	"errors"
	"reflect"
	"testing"

	"github.com/byollm/relayd/protocol"
)

// fuzzDecoders are the defaults, and limits small enough for the fuzzer to
// reach the caps often.
var fuzzDecoders = []Decoder{{}, {Limits: Limits{MaxListItems: 2}}}

// FuzzDecode feeds one body to every v2 decoder, request and answer, and to
// the version classifier. Nothing may panic; a refusal must be a
// *protocol.DecodeError naming its schema; an acceptance must re-encode to
// a body the same decoder reads back to the same value, so no two readings
// of one body differ. Its seed corpus is testdata/fuzz/FuzzDecode.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, dec := range fuzzDecoders {
			for name, decode := range requestDecoders(dec) {
				checkDecoder(t, name, body, decode)
			}
			decl := dec.DeclaredVersion(body, "protocolVersion=2")
			for _, c := range []Classifier{{}, {WithV0: true}} {
				checkClassified(t, c.Daemon, decl)
				checkClassified(t, c.Site, decl)
			}
		}
		for name, decode := range responseDecoders {
			checkDecoder(t, name, body, decode)
		}
	})
}

func checkDecoder(t *testing.T, name string, body []byte, decode schemaDecoder) {
	v, err := decode(body)
	if err != nil {
		var derr *protocol.DecodeError
		if !errors.As(err, &derr) {
			t.Fatalf("%s: refusal is not a *DecodeError: %v", name, err)
		}
		return
	}
	if pair, ok := v.(PairRequest); ok {
		v = pairMember(pair)
	}
	again, err := Marshal(v)
	if err != nil {
		t.Fatalf("%s: accepted %q but cannot encode it: %v", name, body, err)
	}
	back, err := decode(again)
	if err != nil {
		t.Fatalf("%s: accepted %q, but not its own encoding %q: %v", name, body, again, err)
	}
	if pair, ok := back.(PairRequest); ok {
		back = pairMember(pair)
	}
	if !reflect.DeepEqual(v, back) {
		t.Fatalf("%s: %q read as %+v, its encoding as %+v", name, body, v, back)
	}
}

func checkClassified(t *testing.T, classify func(Declaration) (Codec, *Refusal), d Declaration) {
	codec, refusal := classify(d)
	if (codec == 0) == (refusal == nil) {
		t.Fatalf("%+v: exactly one of a codec and a refusal, got %v and %v", d, codec, refusal)
	}
	if refusal != nil && (refusal.Status != 400 || refusal.Body.Error != protocol.CodeUnsupportedProtocolVersion) {
		t.Fatalf("%+v: refused with %+v", d, refusal)
	}
}
