package protocol

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCodeStatus(t *testing.T) {
	cases := []struct {
		code Code
		wire string
		want int
	}{
		{CodeBadRequest, "bad-request", http.StatusBadRequest},
		{CodeUnauthorized, "unauthorized", http.StatusUnauthorized},
		{CodeForbidden, "forbidden", http.StatusForbidden},
		{CodeRevoked, "revoked", http.StatusForbidden},
		{CodeNotFound, "not-found", http.StatusNotFound},
		{CodeNotReady, "not-ready", http.StatusConflict},
		{CodeTooLate, "too-late", http.StatusConflict},
		{CodeClockSkew, "clock-skew", http.StatusUnauthorized},
		{CodeUnsupportedProtocolVersion, "unsupported-protocol-version", http.StatusBadRequest},
		{CodeRateLimited, "rate-limited", http.StatusTooManyRequests},
		{CodeServerError, "server-error", http.StatusServiceUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.wire, func(t *testing.T) {
			require.Equal(t, tc.wire, string(tc.code))
			require.Equal(t, tc.want, tc.code.Status())
		})
	}
}

func marshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

func TestRefusalBodies(t *testing.T) {
	t.Run("unknown path has no message", func(t *testing.T) {
		r := NotFoundPath()
		require.Equal(t, http.StatusNotFound, r.Status)
		require.Equal(t, `{"error":"not-found"}`, marshal(t, r.Body))
		require.Equal(t, "not-found", r.Error())
	})
	t.Run("clock skew carries the clock", func(t *testing.T) {
		r := ClockSkew(1_700_000_000_123)
		require.Equal(t, http.StatusUnauthorized, r.Status)
		require.Equal(t,
			`{"error":"clock-skew","message":"this request's timestamp is too far from the server's clock; check the machine's time and try again","serverTime":1700000000123,"maxSkewMs":120000}`,
			marshal(t, r.Body))
	})
	t.Run("unsupported version names the one supported", func(t *testing.T) {
		r := UnsupportedVersion()
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Equal(t,
			`{"error":"unsupported-protocol-version","message":"this relay speaks protocol version 0 only","supported":["0"],"minimum":"0"}`,
			marshal(t, r.Body))
	})
	t.Run("schema refusal", func(t *testing.T) {
		r := Refuse(CodeBadRequest, MsgSchema)
		require.Equal(t, http.StatusBadRequest, r.Status)
		require.Equal(t, `{"error":"bad-request","message":"request failed schema validation"}`, marshal(t, r.Body))
		require.Equal(t, "bad-request: request failed schema validation", r.Error())
	})
	t.Run("P2_D1_RetryAfterIsSeconds: rate limited names the wait in whole seconds", func(t *testing.T) {
		r := RateLimited(60)
		require.Equal(t, http.StatusTooManyRequests, r.Status)
		require.Equal(t, `{"error":"rate-limited","message":"too many requests from this caller; wait retryAfter seconds and try again","retryAfter":60}`, marshal(t, r.Body))
		require.Equal(t, int64(1), RateLimited(0).Body.RetryAfter, "never a zero wait, which the body would drop")
	})
	t.Run("P2_D1_RetryAfterIsSeconds: a store outage says when to come back", func(t *testing.T) {
		r := StoreUnavailable()
		require.Equal(t, http.StatusServiceUnavailable, r.Status)
		require.Equal(t, `{"error":"server-error","message":"the relay's routing store is unavailable; try again","retryAfter":1}`, marshal(t, r.Body))
	})
	t.Run("403 paired with unauthorized (RB-G1)", func(t *testing.T) {
		r := RefuseWith(http.StatusForbidden, CodeUnauthorized, MsgNotHolder)
		require.Equal(t, http.StatusForbidden, r.Status)
		require.Equal(t, `{"error":"unauthorized","message":"this runner does not hold the job"}`, marshal(t, r.Body))
	})
}
