package plane_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

// pairingListeners serves one relay with codes on a public and an admin
// socket, and returns both URLs with the codes and their clock.
func pairingListeners(t *testing.T, codes store.Pairings) (public, admin string) {
	t.Helper()
	src, err := projection.Static(projection.Empty())
	require.NoError(t, err)
	relay := plane.New(plane.Config{
		SiteID: siteMain, Store: memory.New(clock.System{}), Pairings: codes, Projection: src.Current,
	})
	pub := httptest.NewServer(relay.Handler())
	t.Cleanup(pub.Close)
	adm := httptest.NewServer(plane.NewAdmin(relay).Handler())
	t.Cleanup(adm.Close)
	return pub.URL, adm.URL
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

const secretDeviceCode = "device-code-secret-0123456789abcdefghijklmno"

// TestP2_D3_AdminListenerResolvesAUserCode: the admin listener answers a live
// user code, as typed, with the pending device and never its device code;
// anything else is the unknown-path 404.
func TestP2_D3_AdminListenerResolvesAUserCode(t *testing.T) {
	c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
	codes := memory.NewPairings(c)
	device := protocol.PublicIdentity{Identity: "IDENT", Encryption: "ENC", EncryptionSig: "SIG"}
	expiresAt, err := codes.StartPairing(t.Context(), store.StartPairingInput{
		Pending: store.PendingPairing{
			DeviceCode: secretDeviceCode, UserCode: "ABCD-EF12", Device: device,
			Label: "bob's laptop", Platform: "darwin", Capabilities: []byte(`[{"kind":"chat","models":["m"]}]`),
		},
		TTLMs: 600_000, Capacity: 5,
	})
	require.NoError(t, err)
	public, admin := pairingListeners(t, codes)

	want := `{"userCode":"ABCD-EF12","device":{"identity":"IDENT","encryption":"ENC","encryptionSig":"SIG"},` +
		`"label":"bob's laptop","platform":"darwin","capabilities":[{"kind":"chat","models":["m"]}],"expiresAt":1750000600000}`
	require.Equal(t, int64(1750000600000), expiresAt)
	for _, typed := range []string{"ABCD-EF12", "abcd-ef12", "%20abcd-EF12%0A", "%C2%A0ABCD-EF12"} {
		status, body := get(t, admin+"/pairings/"+typed)
		require.Equal(t, http.StatusOK, status, typed)
		require.Equal(t, want, body, typed)
		require.NotContains(t, body, secretDeviceCode)
	}
	for _, typed := range []string{"ABCDEF12", "ABCD-EF13", "ABCD%20EF12", "ABCD-EF1", "x", "%25zz"} {
		status, body := get(t, admin+"/pairings/"+typed)
		require.Equal(t, http.StatusNotFound, status, typed)
		require.Equal(t, `{"error":"not-found"}`, body, typed)
	}

	status, body := get(t, public+"/pairings/ABCD-EF12")
	require.Equal(t, http.StatusNotFound, status, "never on the public listener")
	require.NotContains(t, body, "IDENT")

	c.Advance(600_000 * time.Millisecond)
	status, body = get(t, admin+"/pairings/ABCD-EF12")
	require.Equal(t, http.StatusNotFound, status, "dead at expiresAt")
	require.Equal(t, `{"error":"not-found"}`, body)
}

func TestAdminPairingsWithoutACodeStoreFindNothing(t *testing.T) {
	_, admin := pairingListeners(t, nil)
	status, body := get(t, admin+"/pairings/ABCD-EF12")
	require.Equal(t, http.StatusNotFound, status)
	require.Equal(t, `{"error":"not-found"}`, body)
}

type unreachableCodes struct{ store.Pairings }

func (unreachableCodes) PairingByUserCode(context.Context, string) (store.PendingPairing, bool, error) {
	return store.PendingPairing{}, false, errors.New("connection refused")
}

// A code store that cannot answer is a retryable 503, not a 404 that would
// tell the operator the code is unknown.
func TestAdminPairingsStoreFailureIs503(t *testing.T) {
	_, admin := pairingListeners(t, unreachableCodes{})
	status, body := get(t, admin+"/pairings/ABCD-EF12")
	require.Equal(t, http.StatusServiceUnavailable, status)
	require.True(t, strings.Contains(body, `"error":"server-error"`), body)
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	require.NoError(t, err)
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(answer)
}

// RD-D13: the admin listener marks approved the live code a user code names,
// only for the device identity posted, and answers its details; nothing
// else is marked, and the public listener has no such route.
func TestRD_D13_AdminListenerMarksTheApprovedCode(t *testing.T) {
	c := clock.NewManual(time.UnixMilli(1_750_000_000_000))
	codes := memory.NewPairings(c)
	device := protocol.PublicIdentity{Identity: "IDENT", Encryption: "ENC", EncryptionSig: "SIG"}
	_, err := codes.StartPairing(t.Context(), store.StartPairingInput{
		Pending: store.PendingPairing{DeviceCode: secretDeviceCode, UserCode: "ABCD-EF12", Device: device, Label: "laptop", Platform: "linux"},
		TTLMs:   600_000, Capacity: 5,
	})
	require.NoError(t, err)
	public, admin := pairingListeners(t, codes)
	marked := func() bool {
		p, ok, err := codes.PairingByUserCode(t.Context(), "ABCD-EF12")
		require.NoError(t, err)
		require.True(t, ok)
		return p.Approved
	}

	status, _ := post(t, public+"/pairings/ABCD-EF12/approval", `{"identity":"IDENT"}`)
	require.Equal(t, http.StatusNotFound, status, "never on the public listener")
	for _, body := range []string{``, `{`, `{"identity":""}`, `[]`} {
		status, answer := post(t, admin+"/pairings/ABCD-EF12/approval", body)
		require.Equal(t, http.StatusBadRequest, status, body)
		require.Contains(t, answer, `"error":"bad-request"`)
	}
	for path, body := range map[string]string{"ABCD-EF12": `{"identity":"OTHER"}`, "ABCD-EF13": `{"identity":"IDENT"}`, "x": `{"identity":"IDENT"}`} {
		status, answer := post(t, admin+"/pairings/"+path+"/approval", body)
		require.Equal(t, http.StatusNotFound, status, path)
		require.Equal(t, `{"error":"not-found"}`, answer)
	}
	require.False(t, marked())

	status, answer := post(t, admin+"/pairings/abcd-ef12/approval", `{"identity":"IDENT"}`)
	require.Equal(t, http.StatusOK, status, answer)
	require.Equal(t, `{"userCode":"ABCD-EF12","device":{"identity":"IDENT","encryption":"ENC","encryptionSig":"SIG"},`+
		`"label":"laptop","platform":"linux","capabilities":[],"expiresAt":1750000600000}`, answer)
	require.NotContains(t, answer, secretDeviceCode)
	require.True(t, marked())
}
