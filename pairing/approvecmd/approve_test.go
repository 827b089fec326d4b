package approvecmd_test

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/byollm/relayd/clock"
	"github.com/byollm/relayd/internal/peer"
	"github.com/byollm/relayd/pairing/approvecmd"
	"github.com/byollm/relayd/plane"
	"github.com/byollm/relayd/plane/codec2"
	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
	"github.com/byollm/relayd/store"
	"github.com/byollm/relayd/store/memory"
)

const userCode = "ABCD-EF12"

// world is an admin listener holding one pending code for device, and a
// fixture in which alice (not bob) consents to a site.
type world struct {
	admin   string
	fixture string
	device  protocol.PublicIdentity
	codes   *memory.Pairings
}

func newWorld(t *testing.T) *world {
	t.Helper()
	return newWorldWith(t, nil, nil)
}

// newWorldWith is newWorld whose relay authors grants with grants (nil:
// none), and whose fixture edit changes, given the pending device, first.
func newWorldWith(t *testing.T, grants *codec2.Grants, edit func(f *projection.Fixture, device protocol.PublicIdentity)) *world {
	t.Helper()
	site, err := peer.GenerateKeys()
	require.NoError(t, err)
	other, err := peer.GenerateKeys()
	require.NoError(t, err)
	f := projection.Empty()
	f.Sites = []projection.SiteRecord{{SiteID: "site_a", Site: site.Public()}}
	f.Consents = []projection.ConsentRecord{{Owner: "alice", SiteID: "site_a"}}
	f.Devices = []projection.DeviceRecord{{Owner: "carol", RunnerID: "runner_carol", Device: other.Public()}}
	keys, err := peer.GenerateKeys()
	require.NoError(t, err)
	if edit != nil {
		edit(f, keys.Public())
	}
	raw, err := json.MarshalIndent(f, "", "  ")
	require.NoError(t, err)
	w := &world{fixture: filepath.Join(t.TempDir(), "fixture.json")}
	require.NoError(t, os.WriteFile(w.fixture, raw, 0o600))
	w.device = keys.Public()
	w.codes = memory.NewPairings(clock.System{})
	_, err = w.codes.StartPairing(t.Context(), store.StartPairingInput{
		Pending: store.PendingPairing{DeviceCode: "device-code-0123456789abcdefghijklmnopqrstu", UserCode: userCode, Device: w.device, Label: "laptop", Platform: "linux"},
		TTLMs:   time.Minute.Milliseconds(), Capacity: 10,
	})
	require.NoError(t, err)
	src, err := projection.Static(f)
	require.NoError(t, err)
	relay := plane.New(plane.Config{SiteID: "site_a", Store: memory.New(clock.System{}), Pairings: w.codes, Projection: src.Current,
		Protocols: plane.Protocols{V0: true, V2: true}, V2: codec2.Options{Grants: grants}})
	srv := httptest.NewServer(plane.NewAdmin(relay).Handler())
	t.Cleanup(srv.Close)
	w.admin = srv.URL
	return w
}

// run runs the command and returns its exit code, stdout and stderr.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := approvecmd.Run(t.Context(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func (w *world) args(extra ...string) []string {
	return append([]string{"--admin", w.admin, "--fixture", w.fixture}, extra...)
}

func (w *world) load(t *testing.T) *projection.Projection {
	t.Helper()
	raw, err := os.ReadFile(w.fixture)
	require.NoError(t, err)
	p, err := projection.FromJSON(raw)
	require.NoError(t, err)
	return p
}

var runnerIDShape = regexp.MustCompile(`^runner_[0-9a-f]{12}$`)

func TestApproveWritesTheDeviceAndPrintsOneLine(t *testing.T) {
	w := newWorld(t)
	code, stdout, stderr := run(t, w.args("--owner", "alice", " abcd-ef12 ")...)
	require.Equal(t, 0, code, stderr)
	require.Empty(t, stderr)
	require.True(t, strings.HasSuffix(stdout, "}\n") && strings.Count(stdout, "\n") == 1, "one JSON line: %q", stdout)

	var res approvecmd.Result
	require.NoError(t, json.Unmarshal([]byte(stdout), &res))
	require.Regexp(t, runnerIDShape, res.RunnerID)
	keyID, _ := protocol.KeyIDOf(w.device.Identity)
	require.Equal(t, approvecmd.Result{RunnerID: res.RunnerID, Owner: "alice", KeyID: keyID}, res)
	require.Equal(t, `{"runnerId":"`+res.RunnerID+`","owner":"alice","keyId":"`+keyID+`"}`+"\n", stdout)

	got, ok := w.load(t).DeviceByFingerprint(w.device.Identity)
	require.True(t, ok)
	require.Equal(t, projection.DeviceRecord{Owner: "alice", RunnerID: res.RunnerID, Device: w.device}, got)

	// Approving again keeps the runner id and writes nothing new.
	before, err := os.ReadFile(w.fixture)
	require.NoError(t, err)
	code, again, stderr := run(t, w.args(userCode, "--owner", "alice")...)
	require.Equal(t, 0, code, stderr)
	require.Equal(t, stdout, again)
	after, err := os.ReadFile(w.fixture)
	require.NoError(t, err)
	require.Equal(t, before, after)
}

func TestApproveWithAChosenRunnerID(t *testing.T) {
	w := newWorld(t)
	code, stdout, stderr := run(t, w.args("--owner", "alice", "--runner-id", "runner_laptop", userCode)...)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"runnerId":"runner_laptop"`)
	_, ok := w.load(t).DeviceFor("runner_laptop")
	require.True(t, ok)
}

func TestApproveRefuses(t *testing.T) {
	tests := []struct {
		name string
		args func(w *world) []string
		exit int
		want string
	}{
		{"unknown code", func(w *world) []string { return w.args("--owner", "alice", "ZZZZ-ZZZZ") }, 1, "no pending pairing has that user code ZZZZ-ZZZZ"},
		{"malformed code", func(w *world) []string { return w.args("--owner", "alice", "ABCDEF12") }, 1, "not a user code"},
		{"owner without consent", func(w *world) []string { return w.args("--owner", "bob", userCode) }, 1, `"bob" consents to no site`},
		{"runner id of another device", func(w *world) []string { return w.args("--owner", "alice", "--runner-id", "runner_carol", userCode) }, 1,
			`runner id "runner_carol" is taken by another device`},
		{"admin unreachable", func(w *world) []string {
			return []string{"--admin", "http://127.0.0.1:1", "--fixture", w.fixture, "--owner", "alice", userCode}
		}, 1, "ask the admin listener"},
		{"admin not a URL", func(w *world) []string {
			return []string{"--admin", "127.0.0.1:9090", "--fixture", w.fixture, "--owner", "alice", userCode}
		}, 1, "want http://HOST:PORT"},
		{"missing fixture", func(w *world) []string {
			return []string{"--admin", w.admin, "--fixture", w.fixture + ".missing", "--owner", "alice", userCode}
		}, 1, "read the fixture"},
		{"no owner", func(w *world) []string { return w.args(userCode) }, 2, "--admin, --fixture and --owner are required"},
		{"no code", func(w *world) []string { return w.args("--owner", "alice") }, 2, "want exactly one USER-CODE, got 0"},
		{"two codes", func(w *world) []string { return w.args("--owner", "alice", userCode, userCode) }, 2, "got 2"},
		{"unknown flag", func(w *world) []string { return w.args("--owner", "alice", "--force", userCode) }, 2, "flag provided but not defined: -force"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			before, err := os.ReadFile(w.fixture)
			require.NoError(t, err)
			code, stdout, stderr := run(t, tc.args(w)...)
			require.Equal(t, tc.exit, code)
			require.Empty(t, stdout)
			require.Contains(t, stderr, tc.want)
			require.True(t, strings.HasPrefix(stderr, "relayd approve: ") && strings.Count(stderr, "\n") == 1, "one line: %q", stderr)
			after, err := os.ReadFile(w.fixture)
			require.NoError(t, err)
			require.Equal(t, before, after, "nothing is written")
		})
	}
}

// A device the fixture already gives to another owner is not moved by an
// approval: that takes an edit by hand.
func TestApproveRefusesToMoveADeviceToAnotherOwner(t *testing.T) {
	w := newWorld(t)
	code, _, stderr := run(t, w.args("--owner", "alice", userCode)...)
	require.Equal(t, 0, code, stderr)
	f := w.load(t).Fixture()
	f.Consents = append(f.Consents, projection.ConsentRecord{Owner: "dave", SiteID: "site_a"})
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(w.fixture, raw, 0o600))

	code, _, stderr = run(t, w.args("--owner", "dave", userCode)...)
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `already approved for another owner: "alice"`)
	got, ok := w.load(t).DeviceByFingerprint(w.device.Identity)
	require.True(t, ok)
	require.Equal(t, "alice", got.Owner, "still alice's")
}

// A revoked device stays revoked: whoever holds its keys can start a code,
// so approving one must not undo the revocation.
func TestApproveRefusesARevokedDevice(t *testing.T) {
	w := newWorld(t)
	f := w.load(t).Fixture()
	f.Devices = append(f.Devices, projection.DeviceRecord{Owner: "alice", RunnerID: "runner_old", Device: w.device, Revoked: true})
	raw, err := json.Marshal(f)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(w.fixture, raw, 0o600))

	code, stdout, stderr := run(t, w.args("--owner", "alice", userCode)...)
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "the device is revoked in the fixture (runner runner_old)")
	require.True(t, w.load(t).RevokedDevice("runner_old"), "still revoked")
}

func TestApproveHelp(t *testing.T) {
	code, stdout, stderr := run(t, "--help")
	require.Equal(t, 0, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "usage: relayd approve --admin http://HOST:PORT --fixture PATH --owner OWNER [--runner-id ID] [--grant-key KEY|none] USER-CODE")
}

func TestNewRunnerID(t *testing.T) {
	id, err := approvecmd.NewRunnerID(bytes.NewReader([]byte{0, 1, 2, 0xab, 0xcd, 0xef}))
	require.NoError(t, err)
	require.Equal(t, "runner_000102abcdef", id)
	_, err = approvecmd.NewRunnerID(bytes.NewReader(nil))
	require.Error(t, err)
}

// The command marks approved exactly the code it was given (RD-D13): another
// code started for the same public identity, from another address, stays
// unmarked, so it can never collect the pairing.
func TestApproveMarksOnlyTheTypedCode(t *testing.T) {
	w := newWorld(t)
	_, err := w.codes.StartPairing(t.Context(), store.StartPairingInput{
		Pending: store.PendingPairing{
			DeviceCode: "device-code-other-0123456789abcdefghijklmno", UserCode: "WXYZ-0000", Device: w.device,
			Label: "not the laptop", Platform: "linux", Origin: "203.0.113.9",
		},
		TTLMs: time.Minute.Milliseconds(), Capacity: 10,
	})
	require.NoError(t, err)

	code, _, stderr := run(t, w.args("--owner", "alice", userCode)...)
	require.Equal(t, 0, code, stderr)
	typed, ok, err := w.codes.PairingByUserCode(t.Context(), userCode)
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, typed.Approved, "the typed code is marked")
	other, ok, err := w.codes.PairingByUserCode(t.Context(), "WXYZ-0000")
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, other.Approved, "the other code of the same device is not")
}

// An approval refused before anything is written marks nothing either.
func TestARefusedApprovalMarksNothing(t *testing.T) {
	w := newWorld(t)
	code, _, _ := run(t, w.args("--owner", "bob", userCode)...)
	require.Equal(t, 1, code, "bob consents to no site")
	pending, ok, err := w.codes.PairingByUserCode(t.Context(), userCode)
	require.NoError(t, err)
	require.True(t, ok)
	require.False(t, pending.Approved)
}
