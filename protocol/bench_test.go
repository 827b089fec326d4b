package protocol_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/byollm/relayd/protocol"
)

func BenchmarkVerify(b *testing.B) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"protocolVersion":"0","runnerId":"runner_a","capabilities":[],"max":8}`)
	now := time.Now().UnixMilli()
	h := http.Header{}
	protocol.SignRequest(h, protocol.HeaderRunner, priv, "claim", "runner_a", now, body)
	sig, ok := protocol.ParseSignature(h, protocol.HeaderRunner)
	if !ok {
		b.Fatal("unsigned")
	}
	key := protocol.EncodeKey(pub)
	for b.Loop() {
		if protocol.Verify(sig, "claim", body, key, now) != protocol.Valid {
			b.Fatal("invalid")
		}
	}
}

func BenchmarkDecodeClaim(b *testing.B) {
	caps := make([]protocol.Capability, 8)
	for i := range caps {
		caps[i] = protocol.Capability{Kind: protocol.KindChat, BackendID: "ollama", BackendClass: "http", Model: "llama3", OfferScope: "public"}
	}
	body, err := json.Marshal(protocol.ClaimRequest{ProtocolVersion: "0", RunnerID: "runner_a", Capabilities: caps, Max: 8})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := protocol.DecodeClaim(body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeResult(b *testing.B) {
	env := protocol.SealedEnvelope{Ciphertext: strings.Repeat("A", 4096), RecipientKeyID: "BYOLLM-R", SenderKeyID: "BYOLLM-S", Direction: "result", DeadlineAt: 1}
	body, err := json.Marshal(protocol.ResultRequest{ProtocolVersion: "0", RunnerID: "runner_a", JobID: "job", LeaseID: "lease", Envelope: env, Disposition: "ok"})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := protocol.DecodeResult(body); err != nil {
			b.Fatal(err)
		}
	}
}
