package admission

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol/proto2"
)

// authorNow is the relay clock of the external author tests.
var authorNow = time.UnixMilli(1_800_000_000_000)

// fakeAuthor is an external grant author on a real socket: it records each
// request and answers what answer returns for it.
type fakeAuthor struct {
	t      *testing.T
	srv    *httptest.Server
	signer Signer
	mu     sync.Mutex
	bodies [][]byte
	heads  []http.Header
	answer func(w http.ResponseWriter, body []byte)
}

func newFakeAuthor(t *testing.T) *fakeAuthor {
	t.Helper()
	f := &fakeAuthor{t: t, signer: newKeySigner(mustKey(t, 9))}
	f.answer = func(w http.ResponseWriter, _ []byte) { f.grant(w, f.goodClaims()) }
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.bodies = append(f.bodies, body)
		f.heads = append(f.heads, r.Header.Clone())
		answer := f.answer
		f.mu.Unlock()
		answer(w, body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAuthor) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.bodies)
}

func (f *fakeAuthor) set(answer func(w http.ResponseWriter, body []byte)) {
	f.mu.Lock()
	f.answer = answer
	f.mu.Unlock()
}

// goodClaims are what a correct author grants memberClaim.
func (f *fakeAuthor) goodClaims() Claims {
	return Claims{
		GrantID: "grant_11111111-1111-4111-8111-111111111111", JobID: "job_1", Site: siteKeyID, User: "alice", Owner: "bob",
		Purpose: "default", Kind: gen, Service: "echo", IssuedAt: authorNow.UnixMilli(),
	}
}

// signed is c signed with the author's key, as a JSON object.
func (f *fakeAuthor) signed(c Claims) map[string]any {
	g, err := Sign(context.Background(), f.signer, c)
	require.NoError(f.t, err)
	var m map[string]any
	data, err := json.Marshal(g)
	require.NoError(f.t, err)
	require.NoError(f.t, json.Unmarshal(data, &m))
	return m
}

func (f *fakeAuthor) grant(w http.ResponseWriter, c Claims) {
	writeAnswer(w, map[string]any{"granted": f.signed(c)})
}

func writeAnswer(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func answerRaw(status int, body string) func(http.ResponseWriter, []byte) {
	return func(w http.ResponseWriter, _ []byte) {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

func (f *fakeAuthor) external(t *testing.T, o ExternalOptions) *External {
	t.Helper()
	o.URL = f.srv.URL + "/author"
	o.Keys = []string{f.signer.PublicKey()}
	if o.Now == nil {
		o.Now = func() time.Time { return authorNow }
	}
	e, err := NewExternal(o)
	require.NoError(t, err)
	return e
}

func (f *fakeAuthor) grantKey(t *testing.T) projection.GrantKey {
	t.Helper()
	k, err := projection.ParseGrantKey(f.signer.PublicKey())
	require.NoError(t, err)
	return k
}

func teamProjection(t *testing.T) *projection.Projection {
	t.Helper()
	p, err := projection.New(teamFixture())
	require.NoError(t, err)
	return p
}

// externalClaim is memberClaim with the lease and runner an external
// author is sent.
func externalClaim() Claim {
	c := memberClaim()
	c.Lease = proto2.Lease{ID: "lease_1", RunnerID: "runner_bob", ExpiresAt: 1_800_000_060_000}
	c.RunnerID = "runner_bob"
	return c
}

func TestExternalSendsTheReferenceInputAndTheToken(t *testing.T) {
	f := newFakeAuthor(t)
	e := f.external(t, ExternalOptions{Token: "s3cret-token"})
	out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
	require.True(t, out.Decision.Granted)
	require.Equal(t, 1, f.calls())
	want := `{"job":{"id":"job_1","kind":"llm.generate","owner":"alice","site":"` + siteKeyID + `","audience":"team",` +
		`"sizeClass":"small","streaming":false,"deadlineAt":1900000000000,` +
		`"lease":{"id":"lease_1","runnerId":"runner_bob","expiresAt":1800000060000}},` +
		`"siteId":"site_demo","siteKey":"` + siteKeyID + `","owner":"bob","runnerId":"runner_bob",` +
		`"capabilities":[{"kind":"llm.generate","service":"echo","backendId":"openai-http","backendClass":"http","model":"m","offerScope":"team"}]}`
	require.Equal(t, want, string(f.bodies[0]), "the purpose is omitted, never sent as \"\"")
	require.Equal(t, "application/json", f.heads[0].Get("Content-Type"))
	require.Equal(t, "Bearer s3cret-token", f.heads[0].Get("Authorization"))
}

func TestExternalSendsAPurposeAndNoTokenUnlessSet(t *testing.T) {
	f := newFakeAuthor(t)
	c := externalClaim()
	c.Stub.Purpose = "chat <&>"
	f.set(func(w http.ResponseWriter, _ []byte) {
		claims := f.goodClaims()
		claims.Purpose = "chat <&>"
		f.grant(w, claims)
	})
	out := f.external(t, ExternalOptions{}).Author(context.Background(), teamProjection(t), c, f.grantKey(t), authorNow)
	require.True(t, out.Decision.Granted, "the explicit purpose is what the grant must say")
	require.Contains(t, string(f.bodies[0]), `"siteKey":"`+siteKeyID+`","purpose":"chat <&>","owner":"bob",`)
	require.Empty(t, f.heads[0].Values("Authorization"))
}

func TestExternalGrantIsAnsweredFromRelaydsOwnStruct(t *testing.T) {
	f := newFakeAuthor(t)
	out := f.external(t, ExternalOptions{}).Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
	require.Equal(t, Decision{Granted: true, Terms: Terms{
		JobID: "job_1", Site: siteKeyID, User: "alice", Owner: "bob", Purpose: "default", Kind: gen, Service: "echo",
	}}, out.Decision)
	require.NotNil(t, out.Grant)
	require.Equal(t, f.goodClaims(), ClaimsOf(*out.Grant))
	require.True(t, Verify(f.signer.PublicKey(), *out.Grant))
}

func TestExternalDeclinesAreTrustedAsTheAuthorSaysThem(t *testing.T) {
	f := newFakeAuthor(t)
	e := f.external(t, ExternalOptions{})
	for _, tc := range []struct {
		answer    string
		reason    Reason
		permanent bool
	}{
		{`{"declined":{"permanent":true,"reason":"not-a-member"}}`, ReasonNotAMember, true},
		{`{"declined":{"reason":"consent-paused","permanent":false}}`, ReasonConsentPaused, false},
		{`{"declined":{"permanent":true,"reason":"unmapped"}}`, ReasonUnmapped, true},
		{`{"declined":{"permanent":false,"reason":"not-consented"}}`, ReasonNotConsented, false},
		{`{"declined":{"permanent":false}}`, "", false},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			f.set(answerRaw(http.StatusOK, tc.answer))
			out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
			require.Nil(t, out.Grant)
			require.False(t, out.Decision.Granted)
			require.Equal(t, tc.reason, out.Decision.Reason)
			require.Equal(t, tc.permanent, out.Decision.Permanent())
		})
	}
}

// G-R38: every failure of the author is a transient author-unavailable.
func TestExternalFailuresAreAuthorUnavailable(t *testing.T) {
	f := newFakeAuthor(t)
	var logs bytes.Buffer
	e := f.external(t, ExternalOptions{Token: "never-logged-token", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	good := func(w http.ResponseWriter, _ []byte) { f.grant(w, f.goodClaims()) }
	for name, answer := range map[string]func(http.ResponseWriter, []byte){
		"500":              answerRaw(http.StatusInternalServerError, `{"declined":{"permanent":true}}`),
		"404":              answerRaw(http.StatusNotFound, ""),
		"201 with a grant": func(w http.ResponseWriter, _ []byte) { w.WriteHeader(http.StatusCreated); f.grant(w, f.goodClaims()) },
		"a redirect": func(w http.ResponseWriter, _ []byte) {
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusFound)
		},
		"not JSON":                 answerRaw(http.StatusOK, "granted"),
		"an empty body":            answerRaw(http.StatusOK, ""),
		"null":                     answerRaw(http.StatusOK, "null"),
		"an empty object":          answerRaw(http.StatusOK, "{}"),
		"an array":                 answerRaw(http.StatusOK, `[{"declined":{"permanent":false}}]`),
		"an unknown key":           answerRaw(http.StatusOK, `{"refused":{"permanent":true}}`),
		"both shapes":              answerRaw(http.StatusOK, `{"granted":{},"declined":{"permanent":true}}`),
		"data after the answer":    answerRaw(http.StatusOK, `{"declined":{"permanent":true}} {}`),
		"declined, no permanent":   answerRaw(http.StatusOK, `{"declined":{"reason":"not-a-member"}}`),
		"declined, permanent null": answerRaw(http.StatusOK, `{"declined":{"permanent":null}}`),
		"declined, permanent text": answerRaw(http.StatusOK, `{"declined":{"permanent":"true"}}`),
		"declined, reason number":  answerRaw(http.StatusOK, `{"declined":{"permanent":true,"reason":5}}`),
		"declined, reason null":    answerRaw(http.StatusOK, `{"declined":{"permanent":true,"reason":null}}`),
		"declined, an extra key":   answerRaw(http.StatusOK, `{"declined":{"permanent":true,"why":"x"}}`),
		"declined, not an object":  answerRaw(http.StatusOK, `{"declined":true}`),
		"an answer too large":      answerRaw(http.StatusOK, `{"declined":{"permanent":true,"reason":"`+strings.Repeat("x", maxAuthorAnswer)+`"}}`),
	} {
		t.Run(name, func(t *testing.T) {
			f.set(answer)
			out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
			require.Equal(t, Outcome{Decision: decline(ReasonAuthorUnavailable)}, out)
			require.False(t, out.Decision.Permanent())
		})
	}
	f.set(good)
	require.True(t, e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow).Decision.Granted,
		"the same author, answering well, grants")
	require.Contains(t, logs.String(), "author-unavailable")
	require.NotContains(t, logs.String(), "never-logged-token")
}

func TestExternalTimeoutIsAuthorUnavailable(t *testing.T) {
	f := newFakeAuthor(t)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	f.set(func(w http.ResponseWriter, _ []byte) {
		<-release
		f.grant(w, f.goodClaims())
	})
	e := f.external(t, ExternalOptions{Timeout: 50 * time.Millisecond})
	out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
	require.Equal(t, Outcome{Decision: decline(ReasonAuthorUnavailable)}, out)
	require.Equal(t, 1, f.calls())
}

func TestExternalUnreachableIsAuthorUnavailable(t *testing.T) {
	f := newFakeAuthor(t)
	e := f.external(t, ExternalOptions{})
	f.srv.Close()
	out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
	require.Equal(t, Outcome{Decision: decline(ReasonAuthorUnavailable)}, out)
}

// G-R37: a grant the device would refuse is a transient author-invalid.
func TestExternalGrantTheDeviceWouldRefuseIsAuthorInvalid(t *testing.T) {
	f := newFakeAuthor(t)
	var logs bytes.Buffer
	e := f.external(t, ExternalOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	other := newKeySigner(mustKey(t, 10))
	with := func(edit func(*Claims)) func(http.ResponseWriter, []byte) {
		return func(w http.ResponseWriter, _ []byte) {
			c := f.goodClaims()
			edit(&c)
			f.grant(w, c)
		}
	}
	withObject := func(edit func(map[string]any)) func(http.ResponseWriter, []byte) {
		return func(w http.ResponseWriter, _ []byte) {
			g := f.signed(f.goodClaims())
			edit(g)
			writeAnswer(w, map[string]any{"granted": g})
		}
	}
	cases := map[string]func(http.ResponseWriter, []byte){
		"another job":           with(func(c *Claims) { c.JobID = "job_2" }),
		"another site":          with(func(c *Claims) { c.Site = "SITEKEYID" }),
		"another user":          with(func(c *Claims) { c.User = "carol" }),
		"another owner":         with(func(c *Claims) { c.Owner = "alice" }),
		"another kind":          with(func(c *Claims) { c.Kind = "llm.chat" }),
		"another purpose":       with(func(c *Claims) { c.Purpose = "chat" }),
		"a service not offered": with(func(c *Claims) { c.Service = "other" }),
		"issued 61 s ago":       with(func(c *Claims) { c.IssuedAt = authorNow.Add(-61 * time.Second).UnixMilli() }),
		"issued 6 s ahead":      with(func(c *Claims) { c.IssuedAt = authorNow.Add(6 * time.Second).UnixMilli() }),
		"signed by another key": func(w http.ResponseWriter, _ []byte) {
			g, err := Sign(context.Background(), other, f.goodClaims())
			require.NoError(t, err)
			writeAnswer(w, map[string]any{"granted": g})
		},
		"a changed claim after signing": withObject(func(g map[string]any) { g["grantId"] = "grant_22222222-2222-4222-8222-222222222222" }),
		"an extra key":                  withObject(func(g map[string]any) { g["scope"] = "all" }),
		"no signature":                  withObject(func(g map[string]any) { delete(g, "signature") }),
		"issuedAt as text":              withObject(func(g map[string]any) { g["issuedAt"] = fmt.Sprint(authorNow.UnixMilli()) }),
		"granted null":                  answerRaw(http.StatusOK, `{"granted":null}`),
		"granted not an object":         answerRaw(http.StatusOK, `{"granted":"yes"}`),
	}
	for name, answer := range cases {
		t.Run(name, func(t *testing.T) {
			f.set(answer)
			out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
			require.Equal(t, Outcome{Decision: decline(ReasonAuthorInvalid)}, out)
			require.False(t, out.Decision.Permanent())
		})
	}
	t.Run("a service offered to its owner only, for a member's job", func(t *testing.T) {
		f.set(func(w http.ResponseWriter, _ []byte) { f.grant(w, f.goodClaims()) })
		c := externalClaim()
		c.Capabilities = []proto2.Capability{capability(gen, "echo", "private")}
		out := e.Author(context.Background(), teamProjection(t), c, f.grantKey(t), authorNow)
		require.Equal(t, Outcome{Decision: decline(ReasonAuthorInvalid)}, out)
	})
	require.Contains(t, logs.String(), "author-invalid")
	require.NotContains(t, logs.String(), f.signed(f.goodClaims())["signature"], "no signature is logged")
}

func TestExternalIssuedAtWindowEdgesAreAccepted(t *testing.T) {
	f := newFakeAuthor(t)
	e := f.external(t, ExternalOptions{})
	for _, at := range []time.Time{authorNow.Add(-60 * time.Second), authorNow.Add(5 * time.Second)} {
		f.set(func(w http.ResponseWriter, _ []byte) {
			c := f.goodClaims()
			c.IssuedAt = at.UnixMilli()
			f.grant(w, c)
		})
		out := e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow)
		require.True(t, out.Decision.Granted, "issued at %s", at.Sub(authorNow))
	}
}

func TestExternalUnknownSiteIsDeclinedWithoutAsking(t *testing.T) {
	f := newFakeAuthor(t)
	c := externalClaim()
	c.Stub.Site = "NOSUCHSITE"
	out := f.external(t, ExternalOptions{}).Author(context.Background(), teamProjection(t), c, f.grantKey(t), authorNow)
	require.Equal(t, Outcome{Decision: decline(ReasonUnknownSite)}, out)
	require.Zero(t, f.calls())
}

func TestNewExternalRefusesBadKeys(t *testing.T) {
	key := newKeySigner(mustKey(t, 9)).PublicKey()
	for name, keys := range map[string][]string{
		"none":         nil,
		"not a key":    {"not-a-key"},
		"padded":       {key + "="},
		"listed twice": {key, key},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewExternal(ExternalOptions{URL: "https://author.example/grant", Keys: keys})
			require.Error(t, err)
		})
	}
}

func TestTheTokenIsNeverPrinted(t *testing.T) {
	tok := Token("the-bearer-token")
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("x", slog.Any("token", tok), slog.Any("opts", ExternalOptions{Token: tok}))
	printed := fmt.Sprintf("%v %+v %#v %s", tok, ExternalOptions{Token: tok}, ExternalOptions{Token: tok}, tok) + logs.String()
	require.NotContains(t, printed, "the-bearer-token")
	require.Contains(t, printed, "[redacted]")
}

func TestLoadTokenTrimsAndRefusesEmptyFiles(t *testing.T) {
	tok, err := LoadToken(writeFile(t, "token", []byte("  abc.def \n"), 0o600))
	require.NoError(t, err)
	require.Equal(t, Token("abc.def"), tok)
	for name, data := range map[string]string{"empty": " \n", "two lines": "abc\ndef\n"} {
		t.Run(name, func(t *testing.T) {
			_, err := LoadToken(writeFile(t, "token", []byte(data), 0o600))
			require.Error(t, err)
			require.NotContains(t, err.Error(), "abc")
		})
	}
}

// G-R35: a device enrolled with an author key is authored externally, one
// enrolled with a local key locally, side by side.
func TestAuthorsRouteEachDeviceByItsGrantKey(t *testing.T) {
	f := newFakeAuthor(t)
	local, localKey := teamAuthor(t, rand.Reader)
	var modes []string
	a := Authors{Local: local, External: f.external(t, ExternalOptions{}), Observe: func(mode string, _ time.Duration) { modes = append(modes, mode) }}
	p := teamProjection(t)

	out := a.Author(context.Background(), p, externalClaim(), localKey, authorNow)
	require.True(t, out.Decision.Granted)
	require.True(t, Verify(seedPublic, *out.Grant), "the local key signed it")
	require.Zero(t, f.calls(), "the external author was not asked")

	out = a.Author(context.Background(), p, externalClaim(), f.grantKey(t), authorNow)
	require.True(t, out.Decision.Granted)
	require.True(t, Verify(f.signer.PublicKey(), *out.Grant), "the external author signed it")
	require.Equal(t, 1, f.calls())
	require.Equal(t, []string{SignerLocal, SignerExternal}, modes)

	unknown, err := projection.ParseGrantKey(newKeySigner(mustKey(t, 11)).PublicKey())
	require.NoError(t, err)
	require.True(t, a.Holds(seedPublic))
	require.True(t, a.Holds(f.signer.PublicKey()))
	require.False(t, a.Holds(unknown.String()))
	require.Equal(t, decline(ReasonSignFailed), a.Author(context.Background(), p, externalClaim(), unknown, authorNow).Decision)

	keys := a.AuthorKeys()
	require.Len(t, keys, 3)
	require.Equal(t, KeyInfo{PublicKey: f.signer.PublicKey(), KeyID: KeyID(f.signer), Signer: SignerExternal}, keys[0], "the author's first key is current")
	require.Equal(t, SignerLocal, keys[1].Signer)
	require.Equal(t, []KeyInfo{keys[0]}, Authors{External: f.external(t, ExternalOptions{})}.AuthorKeys())
	require.Empty(t, Authors{}.AuthorKeys())
}

// Without a clock of its own the author checks issuedAt against the now
// the claim is authored at; with one, against that clock.
func TestExternalChecksIssuedAtAgainstTheClockItIsGiven(t *testing.T) {
	f := newFakeAuthor(t)
	later := authorNow.Add(time.Minute)
	e, err := NewExternal(ExternalOptions{URL: f.srv.URL, Keys: []string{f.signer.PublicKey()}})
	require.NoError(t, err)
	require.True(t, e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow).Decision.Granted)
	require.Equal(t, decline(ReasonAuthorInvalid), e.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), later.Add(time.Second)).Decision)
	clocked := f.external(t, ExternalOptions{Now: func() time.Time { return later.Add(time.Second) }})
	require.Equal(t, decline(ReasonAuthorInvalid), clocked.Author(context.Background(), teamProjection(t), externalClaim(), f.grantKey(t), authorNow).Decision,
		"the clock read when the answer arrives wins")
}
