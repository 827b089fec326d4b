package archtest

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// versioned matches the packages of one wire protocol version: a codec
// (plane/codec0, plane/codec2) or a protocol's vocabulary (protocol/proto2).
var versioned = regexp.MustCompile(`^` + module + `/(plane/codec[0-9]+|protocol/proto[0-9]+)$`)

// knowsVersions lists the files of package plane that may import a
// versioned package, and which. The classifier is the one place that maps
// a declared version to its codec; beside it, only protocol "2"'s own
// settings (Config.V2) and its grant-key admin page name codec2. The
// writer, routing and every other file serve any codec alike, so a new
// codec touches none of them (docs/architecture.md, "Adding a codec").
var knowsVersions = map[string][]string{
	"classify.go":     {"plane/codec0", "plane/codec2", "protocol/proto2"},
	"plane.go":        {"plane/codec2"},
	"admin_grants.go": {"plane/codec2"},
}

func TestOnlyTheClassifierPicksAVersion(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(moduleRoot(t), "plane", "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, name := range files {
		base := filepath.Base(name)
		if strings.HasSuffix(base, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if !versioned.MatchString(path) {
				continue
			}
			rel := strings.TrimPrefix(path, module+"/")
			require.Contains(t, knowsVersions[base], rel, "plane/%s imports %s: only the classifier picks a protocol version (docs/architecture.md)", base, rel)
		}
	}
}
