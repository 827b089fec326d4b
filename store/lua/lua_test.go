package lua

import (
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// movedCommonSHA256 is the sha256 of the shared helpers as last reviewed.
// It was that of store/valkey/lua/common.lua when it was cut into the
// sections of common/ (at ed07737), 3990235083ff...1bc5e, until site_page
// and score_page took their arguments as parameters instead of reading
// ARGV by place (the named argument bindings, store/valkey/ops.go), then
// a593311b4028...774ed until section 97 (bucket_set_answer, the reply
// held.lua and hinted.lua share) was added.
const movedCommonSHA256 = "1a9674bf0bd73f9afa9abbae1d707a71533bcc52dfb7e39927c43fd1bbace005"

// TestSharedIsTheMovedCommonLua: cutting common.lua into sections moved
// text and changed none, so every served script, and its SHA, is what it
// was. An edit of the shared helpers changes this hash with it, in the
// same commit, once it is reviewed as a change of the served Lua.
func TestSharedIsTheMovedCommonLua(t *testing.T) {
	shared, err := Shared()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(shared))
	if got := hex.EncodeToString(sum[:]); got != movedCommonSHA256 {
		t.Errorf("the shared helpers hash to %s, want %s (common.lua at the move)", got, movedCommonSHA256)
	}
}

// TestNoLuaFileIsLong: a file is read whole in review; past 600 lines it
// is cut into sections instead.
func TestNoLuaFileIsLong(t *testing.T) {
	const most = 600
	files := 0
	err := fs.WalkDir(Files, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		src, err := Files.ReadFile(name)
		if err != nil {
			return err
		}
		files++
		if n := strings.Count(string(src), "\n"); n > most {
			t.Errorf("%s has %d lines, more than %d", name, n, most)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("walked %d files", files)
	}
}

// TestSectionsAreOrderedByName: the sections are joined in the order of
// their names, so each is named by a two-digit rank and what it holds,
// and each opens with its card.
func TestSectionsAreOrderedByName(t *testing.T) {
	names, err := Sections()
	if err != nil {
		t.Fatal(err)
	}
	ranked := regexp.MustCompile(`^common/[0-9]{2}_[a-z]+\.lua$`)
	for i, name := range names {
		if !ranked.MatchString(name) {
			t.Errorf("%s is not named NN_what.lua", name)
		}
		if i > 0 && name[:9] == names[i-1][:9] {
			t.Errorf("%s and %s share a rank", names[i-1], name)
		}
		src, err := Files.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		card, _, _ := strings.Cut(string(src), "\n\n")
		if !strings.HasPrefix(card, "-- Section "+name[7:9]+",") {
			t.Errorf("%s does not open with its card: %q", name, card)
		}
	}
	if len(names) == 0 || names[0] != "common/00_header.lua" {
		t.Errorf("sections %v do not start with the header", names)
	}
}

// TestACardIsNeverSent: the card is cut with the blank line that ends
// it, and a section without one is refused, not sent with its card.
func TestACardIsNeverSent(t *testing.T) {
	body, err := withoutCard("-- Section 10, what.\n-- It uses nothing.\n\n-- a helper\nlocal function a()\nend\n")
	if err != nil || body != "-- a helper\nlocal function a()\nend\n" {
		t.Errorf("cut to %q, %v", body, err)
	}
	for _, src := range []string{"local function a()\nend\n", "-- a card with no blank line\nlocal x = 1\n", "-- card\nlocal x = 1\n\nlocal y = 2\n"} {
		if _, err := withoutCard(src); err == nil {
			t.Errorf("%q was taken as having a card", src)
		}
	}
}

// TestTheTestClockIsNoScript: the test clock holds the twins of both
// shared clocks, and it is kept out of Files, where it would be taken for
// an operation's script.
func TestTheTestClockIsNoScript(t *testing.T) {
	src, err := TestClock()
	if err != nil {
		t.Fatal(err)
	}
	for _, clock := range []string{"clock_now", "clock_us"} {
		if !strings.Contains(src, "\nlocal function "+clock+"()") {
			t.Errorf("the test clock does not define %s", clock)
		}
	}
	if _, err := fs.Stat(Files, testClockFile); err == nil {
		t.Errorf("%s is in Files", testClockFile)
	}
}
