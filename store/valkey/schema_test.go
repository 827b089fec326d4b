package valkey

import (
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/byollm/relayd/store"
)

// TestSchemaWords: every word the schema writes into Lua is plain, since
// luaString does not escape and the loader strips "--" as a comment.
func TestSchemaWords(t *testing.T) {
	plain := regexp.MustCompile(`^[A-Za-z0-9]+(-[A-Za-z0-9]+)*$`)
	words := append([]string{recordFormat}, jobFieldNames[:]...)
	words = append(words, presenceFieldNames[:]...)
	for _, s := range store.States() {
		words = append(words, string(s))
	}
	for _, c := range store.RefusalCodes() {
		words = append(words, string(c))
	}
	strs, optional, bools, ints, err := stubFields()
	if err != nil {
		t.Fatal(err)
	}
	words = append(append(append(append(words, strs...), optional...), bools...), ints...)
	words = append(words, jsonName(reflect.TypeFor[grantedDevice](), "KeyID"))
	for _, w := range words {
		if !plain.MatchString(w) {
			t.Errorf("schema word %q is not plain", w)
		}
	}
}

// TestScriptsSpellNoSchemaWord: states and refusal codes reach the scripts
// only through the generated STATE_* and REFUSED_* names, so Go's
// constants are the one place they are written.
func TestScriptsSpellNoSchemaWord(t *testing.T) {
	var words []string
	for _, s := range store.States() {
		words = append(words, string(s))
	}
	for _, c := range store.RefusalCodes() {
		words = append(words, string(c))
	}
	for name, src := range luaSources(t) {
		code := luaComment.ReplaceAllString(src, "")
		for _, w := range words {
			if strings.Contains(code, "'"+w+"'") || strings.Contains(code, `"`+w+`"`) {
				t.Errorf("%s spells %q; use its generated name", name, w)
			}
		}
	}
}

// TestSchemaDefinitionsArePruned: the generated definitions are helpers
// like any other, carried only by the scripts that name them.
func TestSchemaDefinitionsArePruned(t *testing.T) {
	touch := loadForTest(t, store.OpTouch).source
	if strings.Contains(touch, "local FIELDS =") || !strings.Contains(touch, "local PRESENCE_FIELDS =") {
		t.Error("touch carries the job schema or lacks the presence schema")
	}
	claim := loadForTest(t, store.OpClaim).source
	for _, def := range []string{"local FORMAT = '" + recordFormat + "'", "local FIELDS = { 'v', 'site', ", "local STATE_AWAITING_PAYLOAD = 'awaiting-payload'", "local STUB_INTS = { 'deadlineAt' }"} {
		if !strings.Contains(claim, def) {
			t.Errorf("claim lacks %q", def)
		}
	}
	if !strings.Contains(loadForTest(t, store.OpPayload).source, "local DEVICE_KEY_ID = 'keyId'") {
		t.Error("payload lacks the device key id's member name")
	}
	if strings.Contains(loadForTest(t, store.OpNow).source, "local FORMAT") {
		t.Error("now carries the record format")
	}
}
