package codec_test

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/byollm/relayd/"

// importsOf lists what the non-test files of the package in dir import.
func importsOf(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			out = append(out, path)
		}
	}
	return out
}

// The seam stays a seam: no codec sees the HTTP framework or the plane,
// this package sees no codec, and no codec sees another, so that adding a
// codec touches none already there.
func TestCodecsImportNeitherThePlaneNorEachOther(t *testing.T) {
	dirs, err := os.ReadDir("..")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !d.IsDir() || !strings.HasPrefix(d.Name(), "codec") {
			continue
		}
		for _, path := range importsOf(t, filepath.Join("..", d.Name())) {
			if strings.Contains(path, "labstack/echo") {
				t.Errorf("plane/%s imports %s: echo stays in package plane", d.Name(), path)
			}
			if path == module+"plane" || (strings.HasPrefix(path, module+"plane/") && path != module+"plane/codec") {
				t.Errorf("plane/%s imports %s: a codec depends on plane/codec alone", d.Name(), path)
			}
		}
	}
}
