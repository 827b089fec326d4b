package projection_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// fullDoc is a valid fixture using every record type once. The strictness
// cases below each change one fragment of it.
const fullDoc = `{
 "sites": [{"siteId": "s1", "site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}}],
 "consents": [{"owner": "alice", "siteId": "s1", "paused": false}],
 "devices": [{"owner": "alice", "runnerId": "r1", "device": {"identity": "DI", "encryption": "DE", "encryptionSig": "DS"}}],
 "rosters": [{"id": "ro1", "owner": "alice", "members": ["bob"]}],
 "revoked": [{"owner": "carol", "siteId": "s1"}]
}`

// edit returns fullDoc with the first occurrence of old replaced, failing
// the test if old is not there (so no case silently tests the unchanged
// document).
func edit(t *testing.T, old, replacement string) string {
	t.Helper()
	require.Contains(t, fullDoc, old)
	return strings.Replace(fullDoc, old, replacement, 1)
}

func TestParseFullDocument(t *testing.T) {
	f, err := projection.Parse([]byte(fullDoc))
	require.NoError(t, err)
	require.Equal(t, &projection.Fixture{
		Sites: []projection.SiteRecord{{SiteID: "s1", Site: protocol.PublicIdentity{
			Identity: "SI", Encryption: "SE", EncryptionSig: "SS",
		}}},
		Consents: []projection.ConsentRecord{{Owner: "alice", SiteID: "s1", Paused: false}},
		Devices: []projection.DeviceRecord{{Owner: "alice", RunnerID: "r1", Device: protocol.PublicIdentity{
			Identity: "DI", Encryption: "DE", EncryptionSig: "DS",
		}}},
		Rosters: []projection.RosterRecord{{ID: "ro1", Owner: "alice", Members: []string{"bob"}}},
		Revoked: []projection.RevocationRecord{{Owner: "carol", SiteID: "s1"}},
	}, f)
}

func TestParseDefaults(t *testing.T) {
	f, err := projection.Parse([]byte(`{"consents": [{"owner": "alice", "siteId": "s1"}]}`))
	require.NoError(t, err)
	require.Equal(t, projection.Empty().Sites, f.Sites)
	require.NotNil(t, f.Sites)
	require.NotNil(t, f.Devices)
	require.NotNil(t, f.Rosters)
	require.NotNil(t, f.Revoked)
	require.Empty(t, f.Sites)
	require.Empty(t, f.Devices)
	require.Empty(t, f.Rosters)
	require.Empty(t, f.Revoked)
	require.Equal(t, []projection.ConsentRecord{{Owner: "alice", SiteID: "s1", Paused: false}}, f.Consents)

	f, err = projection.Parse([]byte(`{"consents": [{"owner": "alice", "siteId": "s1", "paused": true}]}`))
	require.NoError(t, err)
	require.True(t, f.Consents[0].Paused)
}

func TestParseAccepts(t *testing.T) {
	for name, doc := range map[string]string{
		"empty consents":           `{"consents": []}`,
		"empty members":            edit(t, `"members": ["bob"]`, `"members": []`),
		"owner not a member":       edit(t, `"members": ["bob"]`, `"members": ["bob", "erin"]`),
		"whitespace is non-empty":  edit(t, `"owner": "alice", "siteId": "s1", "paused"`, `"owner": " ", "siteId": "s1", "paused"`),
		"surrounding whitespace":   "\n\t " + fullDoc + " \n",
		"duplicate records":        edit(t, `"revoked": [{"owner": "carol", "siteId": "s1"}]`, `"revoked": [{"owner": "carol", "siteId": "s1"}, {"owner": "carol", "siteId": "s1"}]`),
		"same key in two objects":  `{"consents": [{"owner": "a", "siteId": "s"}, {"owner": "b", "siteId": "s"}]}`,
		"non-ASCII owner":          edit(t, `"owner": "carol"`, `"owner": "carol \u00e9\u00e8"`),
		"escaped key is the key":   `{"cons\u0065nts": []}`,
		"key order does not count": `{"revoked": [], "consents": [{"siteId": "s", "paused": true, "owner": "o"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := projection.Parse([]byte(doc))
			require.NoError(t, err)
		})
	}
}

// fixtureRefusal is a fixture document Parse refuses, and a fragment of
// its error message.
type fixtureRefusal struct {
	name string
	doc  string
	want string
}

func TestParseRefuses(t *testing.T) {
	cases := append(shapeRefusals(t), valueRefusals(t)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, err := projection.Parse([]byte(tc.doc))
			require.Error(t, err)
			require.Nil(t, f)
			require.Contains(t, err.Error(), tc.want)
			require.True(t, strings.HasPrefix(err.Error(), "fixture: "), "error %q names its source", err)

			// A projection built from the same bytes is refused too.
			p, err := projection.FromJSON([]byte(tc.doc))
			require.Error(t, err)
			require.Nil(t, p)
		})
	}
}

// shapeRefusals are the documents refused for their shape: the document
// itself, a missing consents, and unknown or repeated keys at every level.
func shapeRefusals(t *testing.T) []fixtureRefusal {
	return []fixtureRefusal{
		// The document itself.
		{"empty document", ``, "empty document"},
		{"whitespace only", " \n", "empty document"},
		{"top-level array", `[]`, "must be a JSON object"},
		{"top-level string", `"x"`, "must be a JSON object"},
		{"top-level null", `null`, "must be a JSON object"},
		{"trailing object", fullDoc + ` {}`, "after the top-level object"},
		{"trailing garbage", fullDoc + ` x`, "after the top-level object"},
		{"truncated", fullDoc[:len(fullDoc)-3], "invalid JSON"},
		{"invalid UTF-8", edit(t, `"owner": "carol"`, "\"owner\": \"car\xffol\""), "UTF-8"},
		// Found by FuzzParseFixture: encoding/json reads a lone surrogate
		// as U+FFFD, the strict request parser refuses it.
		{"unpaired surrogate escape", edit(t, `"owner": "carol"`, `"owner": "car\ud800ol"`), "unpaired surrogate"},
		{"syntax error", "{\n \"consents\": [,]}", "invalid JSON at line 2, column 15"},

		// consents is required.
		{"no consents", `{}`, "consents: required"},
		{"no consents, other lists", `{"sites": [], "devices": [], "rosters": [], "revoked": []}`, "consents: required"},

		// Unknown keys, at every level, compared exactly.
		{"unknown top-level key", edit(t, `"sites"`, `"extra": 1, "sites"`), `top level: unknown key "extra"`},
		{"top-level key in other case", `{"Consents": []}`, `unknown key "Consents"`},
		{"unknown site key", edit(t, `"siteId": "s1", "site"`, `"siteId": "s1", "x": 1, "site"`), `sites[0]: unknown key "x"`},
		{"unknown site identity key", edit(t, `"encryptionSig": "SS"`, `"encryptionSig": "SS", "keyId": "k"`), `sites[0].site: unknown key "keyId"`},
		{"site key in other case", edit(t, `"siteId": "s1", "site"`, `"siteid": "s1", "site"`), `sites[0]: unknown key "siteid"`},
		{"unknown consent key", edit(t, `"paused": false`, `"paused": false, "until": 5`), `consents[0]: unknown key "until"`},
		{"unknown device key", edit(t, `"runnerId": "r1"`, `"runnerId": "r1", "name": "laptop"`), `devices[0]: unknown key "name"`},
		{"unknown device identity key", edit(t, `"encryptionSig": "DS"`, `"encryptionSig": "DS", "x": true`), `devices[0].device: unknown key "x"`},
		{"device identity key in other case", edit(t, `"encryptionSig": "DS"`, `"EncryptionSig": "DS"`), `devices[0].device: unknown key "EncryptionSig"`},
		{"unknown roster key", edit(t, `"id": "ro1"`, `"id": "ro1", "name": "family"`), `rosters[0]: unknown key "name"`},
		{"unknown revocation key", edit(t, `{"owner": "carol", "siteId": "s1"}`, `{"owner": "carol", "siteId": "s1", "at": 1}`), `revoked[0]: unknown key "at"`},

		// Repeated keys, at every level.
		{"duplicate top-level key", edit(t, `"sites"`, `"consents": [], "sites"`), `top level: duplicate key "consents"`},
		{"duplicate site key", edit(t, `"siteId": "s1", "site"`, `"siteId": "s1", "siteId": "s2", "site"`), `sites[0]: duplicate key "siteId"`},
		{"duplicate identity key", edit(t, `"identity": "SI"`, `"identity": "SI", "identity": "XX"`), `sites[0].site: duplicate key "identity"`},
		{"duplicate consent key", edit(t, `"paused": false`, `"paused": false, "paused": true`), `consents[0]: duplicate key "paused"`},
		{"duplicate device key", edit(t, `"runnerId": "r1"`, `"runnerId": "r1", "runnerId": "r2"`), `devices[0]: duplicate key "runnerId"`},
		{"duplicate roster key", edit(t, `"members": ["bob"]`, `"members": ["bob"], "members": []`), `rosters[0]: duplicate key "members"`},
		{"duplicate revocation key", edit(t, `{"owner": "carol", "siteId": "s1"}`, `{"owner": "carol", "owner": "dave", "siteId": "s1"}`), `revoked[0]: duplicate key "owner"`},
		{"duplicate key spelled with an escape", `{"consents": [], "cons\u0065nts": []}`, `duplicate key "consents"`},
	}
}

// valueRefusals are the documents refused for a value: a null, a missing
// required field, an empty string, a wrong type.
func valueRefusals(t *testing.T) []fixtureRefusal {
	return []fixtureRefusal{
		// null is never valid.
		{"consents null", `{"consents": null}`, "consents: null is not allowed"},
		{"sites null", `{"consents": [], "sites": null}`, "sites: null is not allowed"},
		{"devices null", `{"consents": [], "devices": null}`, "devices: null is not allowed"},
		{"rosters null", `{"consents": [], "rosters": null}`, "rosters: null is not allowed"},
		{"revoked null", `{"consents": [], "revoked": null}`, "revoked: null is not allowed"},
		{"paused null", edit(t, `"paused": false`, `"paused": null`), "consents[0].paused: null is not allowed"},
		{"owner null", edit(t, `"owner": "alice", "siteId": "s1", "paused"`, `"owner": null, "siteId": "s1", "paused"`), "consents[0].owner: null is not allowed"},
		{"site identity null", edit(t, `"site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}`, `"site": null`), "sites[0].site: null is not allowed"},
		{"members null", edit(t, `"members": ["bob"]`, `"members": null`), "rosters[0].members: null is not allowed"},
		{"member null", edit(t, `"members": ["bob"]`, `"members": ["bob", null]`), "rosters[0].members[1]: null is not allowed"},
		{"record null", `{"consents": [null]}`, "consents[0]: null is not allowed"},

		// Required fields.
		{"site without siteId", edit(t, `"siteId": "s1", "site"`, `"site"`), "sites[0].siteId: required"},
		{"site without keys", edit(t, `, "site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}`, ``), "sites[0].site: required"},
		{"site identity without encryptionSig", edit(t, `, "encryptionSig": "SS"`, ``), "sites[0].site.encryptionSig: required"},
		{"consent without owner", edit(t, `"owner": "alice", "siteId": "s1", "paused"`, `"siteId": "s1", "paused"`), "consents[0].owner: required"},
		{"consent without siteId", edit(t, `"siteId": "s1", "paused"`, `"paused"`), "consents[0].siteId: required"},
		{"device without runnerId", edit(t, `"runnerId": "r1", `, ``), "devices[0].runnerId: required"},
		{"device without owner", edit(t, `"owner": "alice", "runnerId"`, `"runnerId"`), "devices[0].owner: required"},
		{"device without keys", edit(t, `, "device": {"identity": "DI", "encryption": "DE", "encryptionSig": "DS"}`, ``), "devices[0].device: required"},
		{"device identity without identity", edit(t, `"identity": "DI", `, ``), "devices[0].device.identity: required"},
		{"roster without id", edit(t, `"id": "ro1", `, ``), "rosters[0].id: required"},
		{"roster without owner", edit(t, `"owner": "alice", "members"`, `"members"`), "rosters[0].owner: required"},
		{"roster without members", edit(t, `, "members": ["bob"]`, ``), "rosters[0].members: required"},
		{"revocation without siteId", edit(t, `{"owner": "carol", "siteId": "s1"}`, `{"owner": "carol"}`), "revoked[0].siteId: required"},
		{"revocation without owner", edit(t, `{"owner": "carol", "siteId": "s1"}`, `{"siteId": "s1"}`), "revoked[0].owner: required"},

		// Empty strings.
		{"empty siteId", edit(t, `"siteId": "s1", "site"`, `"siteId": "", "site"`), "sites[0].siteId: must be a non-empty string"},
		{"empty site identity", edit(t, `"identity": "SI"`, `"identity": ""`), "sites[0].site.identity: must be a non-empty string"},
		{"empty site encryption", edit(t, `"encryption": "SE"`, `"encryption": ""`), "sites[0].site.encryption: must be a non-empty string"},
		{"empty site encryptionSig", edit(t, `"encryptionSig": "SS"`, `"encryptionSig": ""`), "sites[0].site.encryptionSig: must be a non-empty string"},
		{"empty consent owner", edit(t, `"owner": "alice", "siteId": "s1", "paused"`, `"owner": "", "siteId": "s1", "paused"`), "consents[0].owner: must be a non-empty string"},
		{"empty consent siteId", edit(t, `"siteId": "s1", "paused"`, `"siteId": "", "paused"`), "consents[0].siteId: must be a non-empty string"},
		{"empty device owner", edit(t, `"owner": "alice", "runnerId"`, `"owner": "", "runnerId"`), "devices[0].owner: must be a non-empty string"},
		{"empty runnerId", edit(t, `"runnerId": "r1"`, `"runnerId": ""`), "devices[0].runnerId: must be a non-empty string"},
		{"empty device identity", edit(t, `"identity": "DI"`, `"identity": ""`), "devices[0].device.identity: must be a non-empty string"},
		{"empty device encryption", edit(t, `"encryption": "DE"`, `"encryption": ""`), "devices[0].device.encryption: must be a non-empty string"},
		{"empty device encryptionSig", edit(t, `"encryptionSig": "DS"`, `"encryptionSig": ""`), "devices[0].device.encryptionSig: must be a non-empty string"},
		{"empty roster id", edit(t, `"id": "ro1"`, `"id": ""`), "rosters[0].id: must be a non-empty string"},
		{"empty roster owner", edit(t, `"owner": "alice", "members"`, `"owner": "", "members"`), "rosters[0].owner: must be a non-empty string"},
		{"empty member", edit(t, `"members": ["bob"]`, `"members": ["bob", ""]`), "rosters[0].members[1]: must be a non-empty string"},
		{"empty revocation owner", edit(t, `{"owner": "carol", "siteId": "s1"}`, `{"owner": "", "siteId": "s1"}`), "revoked[0].owner: must be a non-empty string"},
		{"empty revocation siteId", edit(t, `{"owner": "carol", "siteId": "s1"}`, `{"owner": "carol", "siteId": ""}`), "revoked[0].siteId: must be a non-empty string"},

		// Wrong types.
		{"paused as string", edit(t, `"paused": false`, `"paused": "false"`), "consents[0].paused: must be a boolean"},
		{"paused as number", edit(t, `"paused": false`, `"paused": 0`), "consents[0].paused: must be a boolean"},
		{"owner as number", edit(t, `"owner": "alice", "siteId": "s1", "paused"`, `"owner": 7, "siteId": "s1", "paused"`), "consents[0].owner: must be a string"},
		{"members as string", edit(t, `"members": ["bob"]`, `"members": "bob"`), "rosters[0].members: must be an array"},
		{"member as number", edit(t, `"members": ["bob"]`, `"members": [1]`), "rosters[0].members[0]: must be a string"},
		{"sites as object", edit(t, `"sites": [{"siteId": "s1", "site": {"identity": "SI", "encryption": "SE", "encryptionSig": "SS"}}]`, `"sites": {}`), "sites: must be an array"},
		{"consent as array", `{"consents": [[]]}`, "consents[0]: must be an object"},
		{"string as boolean", edit(t, `"paused": false`, `"paused": "yes"`), "must be a boolean"},
		{"object key in unknown nested object", edit(t, `"paused": false`, `"paused": {"x": 1}`), "consents[0].paused: must be a boolean"},
		{"identity as string", edit(t, `"device": {"identity": "DI", "encryption": "DE", "encryptionSig": "DS"}`, `"device": "DI"`), "devices[0].device: must be an object"},
	}
}

func TestValidateFixtureBuiltInCode(t *testing.T) {
	require.NoError(t, projection.Empty().Validate())
	require.NoError(t, (&projection.Fixture{}).Validate(), "nil lists mean empty")

	var nilFixture *projection.Fixture
	require.Error(t, nilFixture.Validate())

	f := &projection.Fixture{
		Consents: []projection.ConsentRecord{{Owner: "alice", SiteID: ""}},
		Rosters:  []projection.RosterRecord{{ID: "r", Owner: "alice", Members: []string{""}}},
		Devices:  []projection.DeviceRecord{{Owner: "alice", RunnerID: "r1"}},
	}
	err := f.Validate()
	require.Error(t, err)
	// Every problem is reported, not just the first.
	for _, want := range []string{
		"consents[0].siteId", "rosters[0].members[0]",
		"devices[0].device.identity", "devices[0].device.encryption", "devices[0].device.encryptionSig",
	} {
		require.Contains(t, err.Error(), want)
	}

	_, err = projection.New(f)
	require.Error(t, err, "New validates")
}

func TestEmpty(t *testing.T) {
	f := projection.Empty()
	require.NotNil(t, f.Sites)
	require.NotNil(t, f.Consents)
	require.NotNil(t, f.Devices)
	require.NotNil(t, f.Rosters)
	require.NotNil(t, f.Revoked)
	require.Empty(t, f.Sites)
	require.Empty(t, f.Consents)
	require.Empty(t, f.Devices)
	require.Empty(t, f.Rosters)
	require.Empty(t, f.Revoked)
	require.NotSame(t, f, projection.Empty(), "each call is a fresh fixture")

	p, err := projection.New(f)
	require.NoError(t, err)
	_, ok := p.SiteFor("s1")
	require.False(t, ok)
	require.False(t, p.MayRouteFor("alice", "s1"))
	require.Empty(t, p.RoutableOwners("alice", "s1"))
}
