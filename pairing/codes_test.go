package pairing_test

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/pairing"
)

func TestNewUserCode(t *testing.T) {
	tests := []struct {
		name  string
		bytes []byte
		want  string
	}{
		{"zeros", make([]byte, 8), "0000-0000"},
		{"each byte mod 32", []byte{0, 1, 31, 32, 33, 255, 18, 200}, "01Z0-1ZJ8"},
		{"no I, L, O or U", []byte{17, 18, 19, 20, 21, 22, 26, 27}, "HJKM-NPTV"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pairing.NewUserCode(bytes.NewReader(tc.bytes))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.True(t, pairing.ValidUserCode(got))
		})
	}
	for range 100 {
		code, err := pairing.NewUserCode(rand.Reader)
		require.NoError(t, err)
		require.Len(t, code, pairing.UserCodeLength)
		require.True(t, pairing.ValidUserCode(code), code)
	}
}

func TestNewDeviceCode(t *testing.T) {
	raw := bytes.Repeat([]byte{0xfb}, 32)
	got, err := pairing.NewDeviceCode(bytes.NewReader(raw))
	require.NoError(t, err)
	require.Len(t, got, pairing.DeviceCodeLength)
	require.Equal(t, base64.RawURLEncoding.EncodeToString(raw), got)
	require.NotContains(t, got, "=")
	require.True(t, strings.ContainsAny(got, "-_"), "base64url, not standard base64")
	require.False(t, strings.ContainsAny(got, "+/"))
}

func TestNewCodesDrawsDeviceCodeFirst(t *testing.T) {
	stream := append(bytes.Repeat([]byte{0}, 32), 1, 2, 3, 4, 5, 6, 7, 8)
	got, err := pairing.NewCodes(bytes.NewReader(stream))
	require.NoError(t, err)
	require.Equal(t, strings.Repeat("A", 43), got.DeviceCode)
	require.Equal(t, "1234-5678", got.UserCode)
}

func TestCodesRandomFailure(t *testing.T) {
	boom := errors.New("no entropy")
	_, err := pairing.NewCodes(iotest.ErrReader(boom))
	require.ErrorIs(t, err, boom)
	_, err = pairing.NewCodes(bytes.NewReader(make([]byte, 35)))
	require.Error(t, err, "a short source is an error, not a short code")
	_, err = pairing.NewUserCode(bytes.NewReader(make([]byte, 7)))
	require.Error(t, err)
}

func TestNormalizeUserCode(t *testing.T) {
	tests := []struct{ typed, want string }{
		{"ABCD-EFGH", "ABCD-EFGH"},
		{"abcd-efgh", "ABCD-EFGH"},
		{"  abcd-efgh\n", "ABCD-EFGH"},
		{"\t\v\f\r\u00a0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000\ufeffABCD-EFGH\ufeff", "ABCD-EFGH"},
		// U+0085 is whitespace to Go, not to JavaScript's trim.
		{"\u0085ABCD-EFGH", "\u0085ABCD-EFGH"},
		{"\u200bABCD-EFGH", "\u200bABCD-EFGH"},
		// JavaScript's upper case, where it lands in ASCII.
		{"\u017f\u0131", "SI"},
		{"\u00df\ufb00\ufb06", "SSFFST"},
		{"\ufb01\ufb02\ufb03\ufb04\ufb05", "FIFLFFIFFLST"},
		// Nothing else is forgiven.
		{"ABCD EFGH", "ABCD EFGH"},
		{"ABCDEFGH", "ABCDEFGH"},
		{"ABCD\u2010EFGH", "ABCD\u2010EFGH"},
		{"", ""},
	}
	for _, tc := range tests {
		t.Run(tc.typed, func(t *testing.T) {
			require.Equal(t, tc.want, pairing.NormalizeUserCode(tc.typed))
		})
	}
}

func TestParseUserCode(t *testing.T) {
	for typed, want := range map[string]string{
		"7k3m-9pqz":           "7K3M-9PQZ",
		" 0000-ZZZZ ":         "0000-ZZZZ",
		"\u00df\u00dfab-cdef": "SSSSAB-CDEF",
		"\u00dfab-cdef":       "SSAB-CDEF",
	} {
		got, err := pairing.ParseUserCode(typed)
		if len(want) != pairing.UserCodeLength {
			require.ErrorIs(t, err, pairing.ErrMalformedUserCode, typed)
			continue
		}
		require.NoError(t, err, typed)
		require.Equal(t, want, got)
	}
	for _, typed := range []string{
		"", "ABCD-EFG", "ABCD-EFGHJ", "ABCDEFGHJ", "ABCD_EFGH", "ABCD-EFGI", "LBCD-EFGH",
		"OBCD-EFGH", "UBCD-EFGH", "ABCD--EFG", "-ABCDEFGH", "ABCD-EF H", "ÀBCD-EFGH",
	} {
		_, err := pairing.ParseUserCode(typed)
		require.ErrorIs(t, err, pairing.ErrMalformedUserCode, typed)
		require.False(t, pairing.ValidUserCode(pairing.NormalizeUserCode(typed)), typed)
	}
}

// Every non-ASCII character whose JavaScript toUpperCase is pure ASCII, as
// Node.js 20 lists them by trying every code point; NormalizeUserCode must
// agree on all of them and turn no other character into ASCII.
func TestNormalizeUserCodeMatchesJavaScriptEverywhere(t *testing.T) {
	js := map[rune]string{
		0xdf: "SS", 0x131: "I", 0x17f: "S", 0xfb00: "FF", 0xfb01: "FI",
		0xfb02: "FL", 0xfb03: "FFI", 0xfb04: "FFL", 0xfb05: "ST", 0xfb06: "ST",
	}
	jsSpace := map[rune]bool{}
	for _, r := range "\t\n\v\f\r \u00a0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000\ufeff" {
		jsSpace[r] = true
	}
	isASCII := func(s string) bool {
		for i := 0; i < len(s); i++ {
			if s[i] >= 0x80 {
				return false
			}
		}
		return true
	}
	for r := rune(0x80); r <= 0x10FFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		got := pairing.NormalizeUserCode("x" + string(r) + "y")
		if want, ok := js[r]; ok {
			require.Equal(t, "X"+want+"Y", got, "U+%04X", r)
		} else if isASCII(got) {
			t.Fatalf("U+%04X upper-cases to ASCII %q here but not in JavaScript", r, got)
		}
	}
	for r := rune(0); r <= 0xFFFF; r++ {
		if r >= 0xD800 && r <= 0xDFFF {
			continue
		}
		trimmed := pairing.NormalizeUserCode(string(r)+"X") == "X"
		require.Equal(t, jsSpace[r], trimmed, "U+%04X", r)
	}
}
