package archtest

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// binaryMagic are the first bytes of the executable formats Go can build:
// ELF, Mach-O (both byte orders, 32 and 64 bit) and PE.
var binaryMagic = [][]byte{
	{0x7f, 'E', 'L', 'F'},
	{0xfe, 0xed, 0xfa, 0xce}, {0xce, 0xfa, 0xed, 0xfe},
	{0xfe, 0xed, 0xfa, 0xcf}, {0xcf, 0xfa, 0xed, 0xfe},
	{'M', 'Z'},
}

// TestNoBuiltExecutableIsTracked keeps build output out of the repository:
// a `go build` in the module root writes ./relayd, which was once
// committed by accident (16.6 MB in every clone).
func TestNoBuiltExecutableIsTracked(t *testing.T) {
	root := moduleRoot(t)
	out, err := exec.Command("git", "-C", root, "ls-files", "-z").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		head := make([]byte, 4)
		f, err := os.Open(filepath.Join(root, name))
		if err != nil {
			continue // deleted in the work tree, not yet in the index
		}
		n, _ := f.Read(head)
		_ = f.Close()
		for _, magic := range binaryMagic {
			require.False(t, n >= len(magic) && bytes.Equal(head[:len(magic)], magic),
				"%s is a built executable; build output belongs in bin/ (ignored), not in git", name)
		}
	}
}

// moduleRoot is the directory holding go.mod, found from this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	return filepath.Dir(strings.TrimSpace(string(out)))
}
