package pairing

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"

	"github.com/byollm/relayd/projection"
	"github.com/byollm/relayd/protocol"
)

// Approval is an operator's decision that Device belongs to Owner and is
// known to the relay as RunnerID.
type Approval struct {
	Owner    string
	RunnerID string
	Device   protocol.PublicIdentity
	// GrantKey enrols a newly added device for grants (spec grants.md
	// G-R26); zero leaves it unenrolled. A re-approved device keeps the
	// grantKey its record has, unless ReplaceGrantKey.
	GrantKey projection.GrantKey
	// ReplaceGrantKey makes a re-approval write GrantKey (zero: none) in
	// place of the record's: the operator said which key, or none.
	ReplaceGrantKey bool
}

// Outcome says what Approve did to the fixture.
type Outcome int

const (
	// Unchanged: the device was already approved exactly so; nothing was
	// written.
	Unchanged Outcome = iota
	// Added: a new device record was appended.
	Added
	// Reapproved: the device's existing record (the first with its
	// identity key) was replaced, clearing any revocation.
	Reapproved
)

func (o Outcome) String() string {
	switch o {
	case Added:
		return "added"
	case Reapproved:
		return "re-approved"
	}
	return "unchanged"
}

// Errors Approve returns, wrapped with detail.
var (
	ErrInvalidApproval = errors.New("pairing: invalid approval")
	ErrRunnerIDTaken   = errors.New("pairing: runner id names another device")
	ErrFixtureChanged  = errors.New("pairing: the fixture changed while it was being edited")
)

// Approve writes a into the fixture file at path, so every replica's next
// poll of the keypair's approved code answers approved (decision P2-D3): the
// code approvecmd marked first, or a lone code started before the edit
// (RD-D13). The device's record
// is the first whose identity key matches (what a poll looks up): it is
// replaced if there is one, appended otherwise. Every other byte of the
// file outside the devices list is kept as it was, and so is every other
// device record.
//
// Approve refuses, writing nothing: an approval with an empty owner or
// runner id or an inconsistent device identity; a runner id another device
// already uses; a fixture that does not parse now, or would not parse
// after the edit. The new file is written beside the old one, synced and
// renamed over it, so a reader sees the old file or the new one and never a
// mix; a path that is a symlink is followed and its target replaced. The
// new file keeps the old one's permission bits but belongs to whoever ran
// Approve, so run it as the user that owns the fixture.
// Two concurrent approvals may still lose one: the file is compared just
// before the rename, and ErrFixtureChanged says to run it again.
func Approve(path string, a Approval) (Outcome, error) {
	if err := a.check(); err != nil {
		return Unchanged, err
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return Unchanged, fmt.Errorf("pairing: resolve fixture path: %w", err)
	}
	info, err := os.Stat(target)
	if err != nil {
		return Unchanged, fmt.Errorf("pairing: stat fixture: %w", err)
	}
	original, err := os.ReadFile(target)
	if err != nil {
		return Unchanged, fmt.Errorf("pairing: read fixture: %w", err)
	}
	edited, outcome, err := approveIn(original, a)
	if err != nil || outcome == Unchanged {
		return outcome, err
	}
	if err := replaceFile(target, original, edited, info.Mode().Perm()); err != nil {
		return Unchanged, err
	}
	return outcome, nil
}

func (a Approval) check() error {
	switch {
	case a.Owner == "":
		return fmt.Errorf("%w: empty owner", ErrInvalidApproval)
	case a.RunnerID == "":
		return fmt.Errorf("%w: empty runner id", ErrInvalidApproval)
	case !a.Device.IsConsistent():
		return fmt.Errorf("%w: the device identity is not consistent", ErrInvalidApproval)
	}
	return nil
}

// approveIn returns the fixture document data with a applied.
func approveIn(data []byte, a Approval) ([]byte, Outcome, error) {
	f, err := projection.Parse(data)
	if err != nil {
		return nil, Unchanged, fmt.Errorf("pairing: refusing to edit an invalid fixture: %w", err)
	}
	record := projection.DeviceRecord{Owner: a.Owner, RunnerID: a.RunnerID, Device: a.Device, GrantKey: a.GrantKey}
	index := -1
	for i, d := range f.Devices {
		if d.Device.Identity == a.Device.Identity {
			index = i
			break
		}
	}
	if index >= 0 && !a.ReplaceGrantKey {
		// Re-approval never un-enrols, nor moves a device to another key:
		// that takes a re-pair on the device (G-R39).
		record.GrantKey = f.Devices[index].GrantKey
	}
	for i, d := range f.Devices {
		if i != index && d.RunnerID == a.RunnerID && d.Device.Identity != a.Device.Identity {
			return nil, Unchanged, fmt.Errorf("%w: %q is devices[%d]", ErrRunnerIDTaken, a.RunnerID, i)
		}
	}
	if index >= 0 && reflect.DeepEqual(f.Devices[index], record) {
		return nil, Unchanged, nil
	}
	outcome := Added
	if index >= 0 {
		outcome = Reapproved
	}
	edited, err := withDevice(data, record, index)
	if err != nil {
		return nil, Unchanged, err
	}
	if err := checkApproved(edited, record); err != nil {
		return nil, Unchanged, err
	}
	return edited, outcome, nil
}

// checkApproved parses the edited document and checks a poll and daemon
// authentication would find exactly the approved record.
func checkApproved(edited []byte, record projection.DeviceRecord) error {
	p, err := projection.FromJSON(edited)
	if err != nil {
		return fmt.Errorf("pairing: refusing to write an invalid fixture: %w", err)
	}
	byKey, ok1 := p.DeviceByFingerprint(record.Device.Identity)
	byRunner, ok2 := p.DeviceFor(record.RunnerID)
	if !ok1 || !ok2 || !reflect.DeepEqual(byKey, record) || !reflect.DeepEqual(byRunner, record) {
		return fmt.Errorf("pairing: the edited fixture does not resolve to the approved device")
	}
	return nil
}

// replaceFile writes data to a temporary file in target's directory, syncs
// it and renames it over target, unless target no longer holds original.
func replaceFile(target string, original, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(target)+".approve-*")
	if err != nil {
		return fmt.Errorf("pairing: create temporary fixture: %w", err)
	}
	done := false
	defer func() {
		if !done {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return fmt.Errorf("pairing: write temporary fixture: %w", err)
	}
	if err := tmp.Chmod(perm); err != nil {
		return fmt.Errorf("pairing: set fixture mode: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("pairing: sync temporary fixture: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("pairing: close temporary fixture: %w", err)
	}
	if now, err := os.ReadFile(target); err != nil || !bytes.Equal(now, original) {
		return ErrFixtureChanged
	}
	if err := os.Rename(tmp.Name(), target); err != nil {
		return fmt.Errorf("pairing: replace fixture: %w", err)
	}
	done = true
	// The rename is durable only once the directory is synced.
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("pairing: open fixture directory: %w", err)
	}
	defer func() { _ = d.Close() }()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("pairing: sync fixture directory: %w", err)
	}
	return nil
}

// member is one top-level key of the fixture with its value's raw bytes.
type member struct {
	key   string
	value json.RawMessage
}

// withDevice rebuilds the document with record at devices[index], or
// appended when index is -1. The other top-level values keep their bytes,
// and so do the other device records; only the devices list is laid out
// anew.
func withDevice(data []byte, record projection.DeviceRecord, index int) ([]byte, error) {
	members, err := topLevel(data)
	if err != nil {
		return nil, err
	}
	at := -1
	var devices []json.RawMessage
	for i, m := range members {
		if m.key == "devices" {
			at = i
			if err := json.Unmarshal(m.value, &devices); err != nil {
				return nil, fmt.Errorf("pairing: read devices: %w", err)
			}
		}
	}
	encoded, err := encodeLike(record, devices)
	if err != nil {
		return nil, err
	}
	if index >= 0 {
		devices[index] = encoded
	} else {
		devices = append(devices, encoded)
	}
	list := layoutList(devices)
	if at < 0 {
		members = append(members, member{key: "devices", value: list})
	} else {
		members[at].value = list
	}
	return layoutObject(members)
}

// topLevel splits a (valid) fixture document into its members, in order.
func topLevel(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	if _, err := dec.Token(); err != nil { // the opening '{'
		return nil, fmt.Errorf("pairing: read fixture: %w", err)
	}
	var members []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("pairing: read fixture: %w", err)
		}
		key, _ := tok.(string)
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, fmt.Errorf("pairing: read fixture: %w", err)
		}
		members = append(members, member{key: key, value: value})
	}
	return members, nil
}

// encodeLike encodes record in the style of its neighbours: indented when
// any of them spans lines, on one line otherwise.
func encodeLike(record projection.DeviceRecord, neighbours []json.RawMessage) ([]byte, error) {
	compact, err := encodeCompact(record)
	if err != nil {
		return nil, err
	}
	for _, n := range neighbours {
		if bytes.ContainsRune(n, '\n') {
			var buf bytes.Buffer
			if err := json.Indent(&buf, compact, "    ", "  "); err != nil {
				return nil, fmt.Errorf("pairing: encode: %w", err)
			}
			return buf.Bytes(), nil
		}
	}
	return compact, nil
}

func encodeCompact(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("pairing: encode: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// layoutList lays out a list of records one per line, at the indentation
// of a top-level value.
func layoutList(items []json.RawMessage) json.RawMessage {
	if len(items) == 0 {
		return json.RawMessage("[]")
	}
	var buf bytes.Buffer
	buf.WriteString("[\n")
	for i, item := range items {
		buf.WriteString("    ")
		buf.Write(item)
		if i < len(items)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("  ]")
	return buf.Bytes()
}

// layoutObject writes the top-level object, one member a line.
func layoutObject(members []member) ([]byte, error) {
	var buf bytes.Buffer
	buf.WriteString("{\n")
	for i, m := range members {
		key, err := encodeCompact(m.key)
		if err != nil {
			return nil, err
		}
		buf.WriteString("  ")
		buf.Write(key)
		buf.WriteString(": ")
		buf.Write(m.value)
		if i < len(members)-1 {
			buf.WriteByte(',')
		}
		buf.WriteByte('\n')
	}
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}
