// Package lua holds the Valkey store's Lua: one script per store
// operation, named by its store.Op, and the helpers they share. It is
// the store's contract with the server, so it lives apart from the Go
// that serves it (store/valkey): it can be read and reviewed on its own,
// as the code Valkey runs, and it imports nothing.
//
// store/valkey builds each served script from these files: a generated
// key header and record schema, the shared helpers the script uses, and
// the script's own file.
//
// The shared helpers are the sections in common/, taken in the order of
// their names (00_header.lua, 10_clock.lua, ...): a Lua local must be
// defined before it is used, so a section may use only what the sections
// before it define. Each section opens with its card, a comment saying
// what it holds and what it uses, ended by a blank line; the card is for
// the reader and is not sent, so the sections less their cards, joined,
// are the shared helpers.
//
// testclock/testclock.lua is the test clock (TestClock), kept out of Files
// so that nothing takes it for an operation or a section.
package lua

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Files holds every script by file name ("claim.lua") and the sections
// of the shared helpers under common/.
//
//go:embed *.lua common/*.lua
var Files embed.FS

// testClockFiles holds the test clock, apart from Files: it is no
// operation's script and no section of the shared helpers.
//
//go:embed testclock/testclock.lua
var testClockFiles embed.FS

// testClockFile is the test clock's file in testClockFiles.
const testClockFile = "testclock/testclock.lua"

// TestClock returns the test clock: the twins of the shared clock_now and
// clock_us that read the test clock lever (K.clock). Only a store opened
// for tests is built with it, in place of the shared clocks; a production
// store never serves it.
func TestClock() (string, error) {
	src, err := testClockFiles.ReadFile(testClockFile)
	if err != nil {
		return "", fmt.Errorf("lua: reading the test clock: %w", err)
	}
	return string(src), nil
}

// SectionsDir is the directory of Files holding the shared helpers.
const SectionsDir = "common"

// Sections lists the files of the shared helpers in the order they are
// joined.
func Sections() ([]string, error) {
	entries, err := fs.ReadDir(Files, SectionsDir)
	if err != nil {
		return nil, fmt.Errorf("lua: listing the shared helpers: %w", err)
	}
	var out []string
	for _, e := range entries { // ReadDir sorts by name
		out = append(out, path.Join(SectionsDir, e.Name()))
	}
	return out, nil
}

// Shared returns the shared helpers: every section, less its card, in
// order.
func Shared() (string, error) {
	names, err := Sections()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, name := range names {
		src, err := Files.ReadFile(name)
		if err != nil {
			return "", fmt.Errorf("lua: reading %s: %w", name, err)
		}
		body, err := withoutCard(string(src))
		if err != nil {
			return "", fmt.Errorf("lua: %s: %w", name, err)
		}
		b.WriteString(body)
	}
	return b.String(), nil
}

// withoutCard cuts a section's card: its opening comment lines and the
// blank line that ends them.
func withoutCard(src string) (string, error) {
	card, body, ok := strings.Cut(src, "\n\n")
	if !ok || card == "" {
		return "", fmt.Errorf("no card: a section opens with a comment and a blank line")
	}
	for _, line := range strings.Split(card, "\n") {
		if !strings.HasPrefix(line, "--") {
			return "", fmt.Errorf("card line %q is not a comment", line)
		}
	}
	return body, nil
}
