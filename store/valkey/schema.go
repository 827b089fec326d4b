package valkey

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
)

// The record schema is written here once. Go reads and writes records by
// these constants, and schemaLua turns the same constants into the Lua
// definitions the scripts use (FORMAT, FIELDS, STATE_*, REFUSED_*, ...),
// so no script spells a field position, a state or a refusal code itself.

// recordFormat is the job record format the scripts write and read. A
// record of another format is never acted on but by its deadline. Format
// "2" added the protocol tag and the proto-2 bookkeeping and moved jobs to
// keys named by (site, id); a sweep moves the format-"1" records an older
// relay left into it as proto-0 jobs (see migrate_legacy in
// store/lua/common/80_migration.lua).
const recordFormat = "2"

// legacyFormat is the job record format older relays write, read only to
// move those jobs into the current format.
const legacyFormat = "1"

// presenceFormat is the presence record format. Format "1" grew two
// trailing fields (capabilities, withheld) that older readers ignore, so
// it kept its number.
const presenceFormat = "1"

// rememberFor is how long a stamping write keeps its answer for a re-run
// (see scripts.go).
const rememberFor = 120 * time.Second

// Field positions of a job record. Fields past fieldDisp are the runners
// that refused the job.
const (
	fieldVersion = iota
	fieldSite
	fieldSeq
	fieldDeadline
	fieldState
	fieldStub
	fieldQueueMember
	fieldRunner
	fieldClaimOwner
	fieldDevice
	fieldLease
	fieldLeaseExpiry
	fieldAwaiting
	fieldCancelled
	fieldDisp
	// Added by format "2"; a format-"1" record ends at fieldDisp.
	fieldProto
	fieldJobOwner
	fieldSealAttempts
	fieldReofferTo
	fieldReofferUntil
	fieldRetryAfter
	jobFields
)

// legacyJobFields is how many fields a format-"1" record has before its
// refusing runners.
const legacyJobFields = fieldProto

// jobFieldNames are the names the scripts give the job record's fields.
var jobFieldNames = [jobFields]string{
	fieldVersion: "v", fieldSite: "site", fieldSeq: "seq", fieldDeadline: "deadline", fieldState: "state",
	fieldStub: "stub", fieldQueueMember: "qm", fieldRunner: "runner", fieldClaimOwner: "cowner",
	fieldDevice: "device", fieldLease: "lease", fieldLeaseExpiry: "lexp", fieldAwaiting: "await",
	fieldCancelled: "cancelled", fieldDisp: "disp", fieldProto: "proto", fieldJobOwner: "jowner",
	fieldSealAttempts: "attempts", fieldReofferTo: "reoffer", fieldReofferUntil: "runtil", fieldRetryAfter: "retry",
}

// grantedDevice is a claim's device as a job record keeps it: its public
// keys and, so that the payload and result scripts can tell an envelope for
// another device without hashing in Lua, its key id. Readers that decode it
// as a protocol.PublicIdentity ignore the key id.
type grantedDevice struct {
	protocol.PublicIdentity
	KeyID string `json:"keyId"`
}

// Field positions of a presence record.
const (
	presenceVersion = iota
	presenceOwner
	presenceDevice
	presenceSeen
	// Capabilities and withheld JSON, "" when never said. Records written
	// before they existed end at presenceSeen.
	presenceCapabilities
	presenceWithheld
	presenceFields
)

// presenceRequired is how many fields every presence record has.
const presenceRequired = presenceCapabilities

// presenceFieldNames are the names the scripts give the presence record's
// fields.
var presenceFieldNames = [presenceFields]string{
	presenceVersion: "v", presenceOwner: "owner", presenceDevice: "device", presenceSeen: "seen",
	presenceCapabilities: "caps", presenceWithheld: "withheld",
}

// luaName turns a schema word such as "awaiting-payload" into the upper
// case identifier the scripts know it by, under a kind prefix.
func luaName(kind, word string) string {
	return kind + "_" + strings.ToUpper(strings.ReplaceAll(word, "-", "_"))
}

// schemaLua is the Lua text of the schema: one top-level definition per
// line, so that the loader can leave out those a script does not use.
func schemaLua() (string, error) {
	var b strings.Builder
	b.WriteString("local FORMAT = " + luaString(recordFormat) + "\n")
	b.WriteString("local LEGACY_FORMAT = " + luaString(legacyFormat) + "\n")
	b.WriteString("local PRESENCE_FORMAT = " + luaString(presenceFormat) + "\n")
	b.WriteString("local PRESENCE_REQUIRED = " + strconv.Itoa(presenceRequired) + "\n")
	b.WriteString("local WINDOW_MS = " + strconv.Itoa(protocol.AwaitingPayloadMs) + "\n")
	b.WriteString("local UNSEALED_PER_ROUTE = " + strconv.Itoa(store.UnsealedPerRoute) + "\n")
	b.WriteString("local SEAL_ATTEMPTS = " + strconv.Itoa(store.SealAttemptsBeforeEviction) + "\n")
	b.WriteString("local HOLDER_RETURN_MS = " + strconv.Itoa(store.HolderReturnMs) + "\n")
	b.WriteString("local REQ_TTL_MS = " + strconv.FormatInt(rememberFor.Milliseconds(), 10) + "\n")
	b.WriteString("local ROUTES_TTL_MS = " + strconv.FormatInt(routesTTL.Milliseconds(), 10) + "\n")
	for _, s := range store.States() {
		b.WriteString("local " + luaName("STATE", string(s)) + " = " + luaString(string(s)) + "\n")
	}
	for _, c := range store.RefusalCodes() {
		b.WriteString("local " + luaName("REFUSED", string(c)) + " = " + luaString(string(c)) + "\n")
	}
	writeLuaList(&b, "FIELDS", jobFieldNames[:])
	writeLuaList(&b, "LEGACY_FIELDS", jobFieldNames[:legacyJobFields])
	writeLuaList(&b, "PRESENCE_FIELDS", presenceFieldNames[:])
	writeLuaRecord(&b, "FIELDS", jobFieldNames[:])
	writeLuaRecord(&b, "LEGACY_FIELDS", jobFieldNames[:legacyJobFields])
	writeLuaRecord(&b, "PRESENCE_FIELDS", presenceFieldNames[:])
	b.WriteString("local PAIRING_FORMAT = " + luaString(pairingFormat) + "\n")
	writeLuaList(&b, "PAIRING_FIELDS", pairingFieldNames[:])
	b.WriteString("local PAIRING_FIRST_FIELDS = " + strconv.Itoa(pairingFirstFields) + "\n")
	b.WriteString("local DEVICE_KEY_ID = " + luaString(jsonName(reflect.TypeFor[grantedDevice](), "KeyID")) + "\n")
	strs, optional, bools, ints, err := stubFields()
	if err != nil {
		return "", err
	}
	writeLuaList(&b, "STUB_STRINGS", strs)
	writeLuaList(&b, "STUB_OPTIONAL_STRINGS", optional)
	writeLuaList(&b, "STUB_BOOLS", bools)
	writeLuaList(&b, "STUB_INTS", ints)
	return b.String(), nil
}

// jsonName is the JSON member name of t's field.
func jsonName(t reflect.Type, field string) string {
	f, _ := t.FieldByName(field)
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}

// stubFields sorts protocol.JobStub's JSON fields by the Lua type a valid
// stored stub holds in each (an omitempty string may be absent), so that a
// claim hands out only stubs Go decodes as they were written.
func stubFields() (strs, optional, bools, ints []string, err error) {
	t := reflect.TypeFor[protocol.JobStub]()
	for i := range t.NumField() {
		f := t.Field(i)
		name := jsonName(t, f.Name)
		switch f.Type.Kind() {
		case reflect.String:
			if strings.Contains(f.Tag.Get("json"), ",omitempty") {
				optional = append(optional, name)
				continue
			}
			strs = append(strs, name)
		case reflect.Bool:
			bools = append(bools, name)
		case reflect.Int64:
			ints = append(ints, name)
		default:
			// A field of another kind needs its own check in valid_stub.
			return nil, nil, nil, nil, fmt.Errorf("JobStub.%s is a %s, which valid_stub cannot check", f.Name, f.Type)
		}
	}
	return strs, optional, bools, ints, nil
}

func writeLuaList(b *strings.Builder, name string, items []string) {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = luaString(s)
	}
	b.WriteString("local " + name + " = { " + strings.Join(quoted, ", ") + " }\n")
}

// writeLuaRecord defines <list>_record, which names a split record's
// fields (the format first, left out) by the list's names, and gives a
// field the record lacks the empty string. One table constructor sizes
// the table once, where filling an empty one field by field grows it again
// and again: a record is read on every call of nearly every script.
func writeLuaRecord(b *strings.Builder, list string, names []string) {
	b.WriteString("local function " + list + "_record(f)\n  return {\n")
	for i, n := range names[1:] {
		fmt.Fprintf(b, "    [%s] = f[%d] or '',\n", luaString(n), i+2)
	}
	b.WriteString("  }\nend\n")
}

// luaString quotes a schema word. The words are plain (TestSchemaWords):
// no quote, backslash or "--", which the loader would misread.
func luaString(s string) string { return "'" + s + "'" }
