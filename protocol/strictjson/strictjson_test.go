package strictjson

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParseValues(t *testing.T) {
	v, err := Parse([]byte(` {"s":"a\"b\\c\/d\b\f\n\r\t\u00e9\uD83D\uDE00é","n":-12.50e+3,"z":0,"t":true,"f":false,"x":null,"a":[1,[],{}],"o":{"k":"v"}} `))
	require.NoError(t, err)
	require.Equal(t, Object, v.Kind)

	keys := make([]string, 0, len(v.Members))
	for _, m := range v.Members {
		keys = append(keys, m.Key)
	}
	require.Equal(t, []string{"s", "n", "z", "t", "f", "x", "a", "o"}, keys, "members keep document order")

	s, ok := v.Get("s")
	require.True(t, ok)
	require.Equal(t, Value{Kind: String, Text: "a\"b\\c/d\b\f\n\r\té😀é"}, s)

	n, _ := v.Get("n")
	require.Equal(t, Value{Kind: Number, Text: "-12.50e+3"}, n, "numbers keep their literal")
	z, _ := v.Get("z")
	require.Equal(t, "0", z.Text)

	tr, _ := v.Get("t")
	require.Equal(t, Value{Kind: Bool, Bool: true}, tr)
	f, _ := v.Get("f")
	require.Equal(t, Value{Kind: Bool}, f)
	x, _ := v.Get("x")
	require.Equal(t, Null, x.Kind)

	a, _ := v.Get("a")
	require.Equal(t, Array, a.Kind)
	require.Len(t, a.Items, 3)
	require.Equal(t, Array, a.Items[1].Kind)
	require.Empty(t, a.Items[1].Items)
	require.Equal(t, Object, a.Items[2].Kind)

	o, _ := v.Get("o")
	k, ok := o.Get("k")
	require.True(t, ok)
	require.Equal(t, "v", k.Text)

	_, ok = v.Get("missing")
	require.False(t, ok)
	_, ok = k.Get("k")
	require.False(t, ok, "Get on a non-object finds nothing")
}

func TestParseScalarsAtTopLevel(t *testing.T) {
	for _, doc := range []string{`"x"`, `1`, `-0`, `1E5`, `true`, `null`, "\t[]\r\n", `""`} {
		_, err := Parse([]byte(doc))
		require.NoError(t, err, doc)
	}
}

func TestParseNumberLiterals(t *testing.T) {
	for _, lit := range []string{"0", "-0", "2.0", "1e1", "1E+1", "1e-1", "9007199254740993", "1e400", "0.000001"} {
		v, err := Parse([]byte(`[` + lit + `]`))
		require.NoError(t, err, lit)
		require.Equal(t, Value{Kind: Number, Text: lit}, v.Items[0])
	}
}

func TestParseRefusals(t *testing.T) {
	deep := func(n int, open, close string) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	deepObject := func(n int) string {
		return strings.Repeat(`{"a":`, n-1) + `{}` + strings.Repeat(`}`, n-1)
	}
	cases := []struct {
		name string
		doc  string
		want error
	}{
		{"empty", ``, ErrEmpty},
		{"whitespace only", " \n\t", ErrSyntax},
		{"byte order mark", "\xEF\xBB\xBF{}", ErrBOM},
		{"byte order mark alone", "\xEF\xBB\xBF", ErrBOM},
		{"invalid UTF-8 in a string", "{\"a\":\"\xff\"}", ErrInvalidUTF8},
		{"invalid UTF-8 in a key", "{\"\xc3\x28\":1}", ErrInvalidUTF8},
		{"invalid UTF-8 outside strings", "{}\xff", ErrInvalidUTF8},
		{"UTF-8 encoded surrogate", "[\"\xed\xa0\x80\"]", ErrInvalidUTF8},
		{"overlong UTF-8", "[\"\xc0\xaf\"]", ErrInvalidUTF8},
		{"truncated UTF-8", "[\"\xe2\x82\"]", ErrInvalidUTF8},
		{"duplicate key", `{"a":1,"a":1}`, ErrDuplicateKey},
		{"duplicate key, different values", `{"a":1,"b":2,"a":"x"}`, ErrDuplicateKey},
		{"duplicate key through an escape", `{"a":1,"\u0061":2}`, ErrDuplicateKey},
		{"duplicate key nested in an object", `{"o":{"k":1,"k":2}}`, ErrDuplicateKey},
		{"duplicate key nested in an array", `[{"k":1},{"k":1,"k":1}]`, ErrDuplicateKey},
		{"arrays too deep", deep(MaxDepth+1, "[", "]"), ErrTooDeep},
		{"objects too deep", deepObject(MaxDepth + 1), ErrTooDeep},
		{"trailing value", `{} {}`, ErrTrailingData},
		{"trailing garbage", `{}x`, ErrTrailingData},
		{"trailing NUL", "{}\x00", ErrTrailingData},
		{"literal with a tail", `truex`, ErrTrailingData},
		{"lone high surrogate", `["\uD800"]`, ErrSurrogate},
		{"lone low surrogate", `["\uDC00"]`, ErrSurrogate},
		{"high surrogate then a letter", `["\uD800x"]`, ErrSurrogate},
		{"high surrogate then a non-surrogate escape", `["\uD800\u0041"]`, ErrSurrogate},
		{"two high surrogates", `["\uD800\uD800"]`, ErrSurrogate},
		{"leading zero", `[01]`, ErrSyntax},
		{"plus sign", `[+1]`, ErrSyntax},
		{"bare fraction", `[.5]`, ErrSyntax},
		{"empty fraction", `[1.]`, ErrSyntax},
		{"empty exponent", `[1e]`, ErrSyntax},
		{"exponent sign only", `[1e+]`, ErrSyntax},
		{"lone minus", `[-]`, ErrSyntax},
		{"NaN", `[NaN]`, ErrSyntax},
		{"Infinity", `[Infinity]`, ErrSyntax},
		{"hex number", `[0x10]`, ErrSyntax},
		{"trailing comma in array", `[1,]`, ErrSyntax},
		{"trailing comma in object", `{"a":1,}`, ErrSyntax},
		{"missing colon", `{"a" 1}`, ErrSyntax},
		{"missing comma", `{"a":1 "b":2}`, ErrSyntax},
		{"unquoted key", `{a:1}`, ErrSyntax},
		{"single quotes", `{'a':1}`, ErrSyntax},
		{"comment", `{/*x*/}`, ErrSyntax},
		{"raw control character", "[\"a\tb\"]", ErrSyntax},
		{"raw newline in a string after an escape", "[\"\\n\n\"]", ErrSyntax},
		{"bad escape", `["\x"]`, ErrSyntax},
		{"short unicode escape", `["\u12"]`, ErrSyntax},
		{"non-hex unicode escape", `["\u12G4"]`, ErrSyntax},
		{"unterminated string", `["abc`, ErrSyntax},
		{"unterminated escape", `["abc\`, ErrSyntax},
		{"unterminated object", `{"a":1`, ErrSyntax},
		{"unterminated array", `[1`, ErrSyntax},
		{"misspelt literal", `[tru]`, ErrSyntax},
		{"capitalised literal", `[True]`, ErrSyntax},
		{"non-JSON whitespace", "\u00a0{}", ErrSyntax},
		{"form feed is not whitespace", "\f{}", ErrSyntax},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			require.ErrorIs(t, err, tc.want)
			var perr *Error
			require.ErrorAs(t, err, &perr)
			require.NotEmpty(t, perr.Error())
		})
	}
}

func TestParseDepthLimitIsInclusive(t *testing.T) {
	_, err := Parse([]byte(strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth)))
	require.NoError(t, err)
	_, err = Parse([]byte(strings.Repeat(`{"a":`, MaxDepth-1) + `[]` + strings.Repeat(`}`, MaxDepth-1)))
	require.NoError(t, err)
}

func TestParseAcceptsValidUnicode(t *testing.T) {
	// A BOM after the start is an ordinary character inside a string.
	v, err := Parse([]byte("[\"\xEF\xBB\xBF\u2028\u2029\x7f\"]"))
	require.NoError(t, err)
	require.Equal(t, "\uFEFF\u2028\u2029\x7f", v.Items[0].Text)

	v, err = Parse([]byte(`["\u0000"]`))
	require.NoError(t, err)
	require.Equal(t, "\x00", v.Items[0].Text)
}

func TestErrorOffsetAndDetail(t *testing.T) {
	_, err := Parse([]byte(`{"a":1,"a":2}`))
	var perr *Error
	require.ErrorAs(t, err, &perr)
	require.Equal(t, 7, perr.Offset)
	require.Equal(t, `strictjson: offset 7: duplicate key: "a"`, perr.Error())

	_, err = Parse([]byte("{}  \xff"))
	require.ErrorAs(t, err, &perr)
	require.Equal(t, 4, perr.Offset)

	long := strings.Repeat("é", 100)
	_, err = Parse([]byte(`{"` + long + `":1,"` + long + `":1}`))
	require.ErrorAs(t, err, &perr)
	require.Less(t, len(perr.Detail), 60, "a hostile key is cut short")
	require.True(t, utf8.ValidString(perr.Detail))
}

func TestParseWithCapsTheNumberOfValues(t *testing.T) {
	// {"a":[1,2],"b":null} holds five values: the object, the array, its
	// two items and null.
	doc := []byte(`{"a":[1,2],"b":null}`)
	_, err := ParseWith(doc, Options{MaxValues: 5})
	require.NoError(t, err)
	_, err = ParseWith(doc, Options{MaxValues: 4})
	require.ErrorIs(t, err, ErrTooMany)
	_, err = ParseWith(doc, Options{})
	require.NoError(t, err, "zero options cap nothing")

	// The cap stops the read early: a huge array is refused at the first
	// value past it, whatever follows.
	huge := []byte("[" + strings.Repeat("0,", 1<<20) + "x")
	_, err = ParseWith(huge, Options{MaxValues: 100})
	var perr *Error
	require.ErrorAs(t, err, &perr)
	require.ErrorIs(t, err, ErrTooMany)
	// The array is the first value, so its 100th item is the 101st.
	require.Equal(t, 1+2*99, perr.Offset, "refused at the 101st value, not at the end")
}

func TestKindString(t *testing.T) {
	require.Equal(t, "null", Null.String())
	require.Equal(t, "boolean", Bool.String())
	require.Equal(t, "number", Number.String())
	require.Equal(t, "string", String.String())
	require.Equal(t, "array", Array.String())
	require.Equal(t, "object", Object.String())
	require.Equal(t, "kind(9)", Kind(9).String())
}

// FuzzParse checks Parse never panics and never accepts what encoding/json
// calls invalid, and that accepted strings are valid UTF-8.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{}`, `[]`, `{"a":[1,2.0,1e1,"x",true,false,null]}`, `{"a":1,"a":2}`,
		"\xEF\xBB\xBF{}", `["\uD83D\uDE00"]`, `["\uD800"]`, `[01]`, `{"a":{"b":{"c":[]}}}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(data)
		if err != nil {
			return
		}
		if !json.Valid(data) {
			t.Fatalf("accepted a document encoding/json refuses: %q", data)
		}
		checkStrings(t, v)
	})
}

func checkStrings(t *testing.T, v Value) {
	if v.Kind == String && !utf8.ValidString(v.Text) {
		t.Fatalf("string value is not valid UTF-8: %q", v.Text)
	}
	for _, item := range v.Items {
		checkStrings(t, item)
	}
	for _, m := range v.Members {
		if !utf8.ValidString(m.Key) {
			t.Fatalf("key is not valid UTF-8: %q", m.Key)
		}
		checkStrings(t, m.Value)
	}
}

func TestSafeIntegerReadsAsZodInt(t *testing.T) {
	for literal, want := range map[string]int64{
		"0": 0, "-0": 0, "2.0": 2, "1e1": 10, "0.1e1": 1, "1E+2": 100,
		"9007199254740991": 1<<53 - 1, "-9007199254740991": -(1<<53 - 1),
		"1e-400": 0,
	} {
		v, err := Parse([]byte(literal))
		require.NoError(t, err)
		got, ok := v.SafeInteger()
		require.True(t, ok, literal)
		require.Equal(t, want, got, literal)
	}
	for _, literal := range []string{"1.5", "9007199254740992", "9007199254740993", "-9007199254740992", "1e400", "-1e400", `"1"`, "true", "null"} {
		v, err := Parse([]byte(literal))
		require.NoError(t, err)
		_, ok := v.SafeInteger()
		require.False(t, ok, literal)
	}
}
