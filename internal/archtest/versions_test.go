package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// versioned matches the packages of one wire protocol version: a codec
// (plane/codec0, plane/codec2) or a protocol's vocabulary (protocol/proto2).
var versioned = regexp.MustCompile(`^` + module + `/(plane/codec[0-9]+|protocol/proto[0-9]+)$`)

// versionedImporters lists, for each versioned package, the production
// packages that may import it: what a new codec touches beyond its own
// directory (docs/architecture.md, "Adding a codec"). plane builds the
// codecs in its classifier; server and config carry protocol "2"'s flags
// and settings to it; admission authors protocol "2"'s grants; a codec
// speaks its own protocol's vocabulary.
var versionedImporters = map[string][]string{
	"plane/codec0":    {"plane"},
	"plane/codec2":    {"plane", "server"},
	"protocol/proto2": {"admission", "config", "plane", "plane/codec2", "server"},
}

// knowsVersions lists the files of packages plane and server that may
// import a versioned package, and which. The classifier is the one place
// that maps a declared version to its codec; beside it, only protocol
// "2"'s own settings (Config.V2) and its grant-key admin page name
// codec2, and in server the one file that wires the flags to them. The
// writer, routing and every other file serve any codec alike, so a new
// codec touches none of them.
var knowsVersions = map[string][]string{
	"plane/classify.go":     {"plane/codec0", "plane/codec2", "protocol/proto2"},
	"plane/plane.go":        {"plane/codec2"},
	"plane/admin_grants.go": {"plane/codec2"},
	"server/server.go":      {"plane/codec2", "protocol/proto2"},
}

// The import table says who may import each versioned package; this
// keeps that list short and named, so that a codec's reach past its own
// directory is a decision written down here and in docs/architecture.md.
func TestOnlyNamedPackagesImportAVersion(t *testing.T) {
	for pkg, imports := range allowed {
		for _, imp := range imports {
			if !versioned.MatchString(module + "/" + imp) {
				continue
			}
			require.Contains(t, versionedImporters[imp], pkg, "%s may import %s: name it in versionedImporters and in docs/architecture.md (Adding a codec)", pkg, imp)
		}
	}
	for imp, pkgs := range versionedImporters {
		for _, pkg := range pkgs {
			require.Contains(t, allowed[pkg], imp, "versionedImporters names %s for %s, which the import table does not allow", pkg, imp)
		}
	}
}

func TestOnlyTheClassifierPicksAVersion(t *testing.T) {
	for _, dir := range []string{"plane", "server"} {
		for _, name := range sourceFiles(t, dir) {
			rel := dir + "/" + filepath.Base(name)
			f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
			require.NoError(t, err)
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if !versioned.MatchString(path) {
					continue
				}
				pkg := strings.TrimPrefix(path, module+"/")
				require.Contains(t, knowsVersions[rel], pkg, "%s imports %s: only the classifier picks a protocol version (docs/architecture.md)", rel, pkg)
			}
		}
	}
}

// versionField matches a field that names one protocol version: the
// served flags (Protocols.V2) and a codec's settings (Config.V2).
var versionField = regexp.MustCompile(`^V[0-9]+$`)

// namesVersions lists the files of package plane that may use a
// versioned package or a version's field beyond the classifier's own
// file: plane.go in its Config type alone (where protocol "2"'s settings
// are declared), and the admin listener's readiness and grant-key pages,
// which say protocol "2"'s enqueue policy (decision P2-D5) and grant keys.
var namesVersions = map[string]bool{"admin.go": true, "admin_grants.go": true}

// Beyond its imports, package plane names a version's specifics only in
// the classifier, the Config type and the admin pages above: the writer
// (respond.go), routing and serving (plane.go's functions) and the debug
// page treat every codec alike.
func TestPlaneNamesAVersionOnlyWhereListed(t *testing.T) {
	for _, name := range sourceFiles(t, "plane") {
		base := filepath.Base(name)
		if base == "classify.go" || namesVersions[base] {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		versionedNames := map[string]bool{}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if versioned.MatchString(path) {
				versionedNames[filepath.Base(path)] = true
			}
		}
		for _, decl := range f.Decls {
			if base == "plane.go" && declaresType(decl, "Config") {
				continue
			}
			ast.Inspect(decl, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok {
					require.False(t, versionedNames[x.Name], "%s: plane/%s uses %s.%s outside plane.Config (docs/architecture.md)", fset.Position(sel.Pos()), base, x.Name, sel.Sel.Name)
				}
				require.False(t, versionField.MatchString(sel.Sel.Name), "%s: plane/%s reads .%s: which versions are served is the classifier's (docs/architecture.md)", fset.Position(sel.Pos()), base, sel.Sel.Name)
				return true
			})
		}
	}
}

// declaresType reports whether decl is the declaration of type name.
func declaresType(decl ast.Decl, name string) bool {
	gen, ok := decl.(*ast.GenDecl)
	return ok && gen.Tok == token.TYPE && slices.ContainsFunc(gen.Specs, func(s ast.Spec) bool {
		ts, ok := s.(*ast.TypeSpec)
		return ok && ts.Name.Name == name
	})
}

// sourceFiles lists the non-test Go files of the module's directory dir.
func sourceFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(moduleRoot(t), dir, "*.go"))
	require.NoError(t, err)
	require.NotEmpty(t, files, dir)
	return slices.DeleteFunc(files, func(name string) bool { return strings.HasSuffix(name, "_test.go") })
}
