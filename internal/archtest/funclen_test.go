package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// maxFuncLines is the most lines a function may take, from its func
// keyword to its closing brace.
const maxFuncLines = 80

// longFunc is a function over maxFuncLines.
type longFunc struct {
	key   string // path relative to the module root, then the function: "a/b.go:Run.Report"
	where string // path:line
	lines int
}

// TestNoFunctionIsLong parses every Go file of the module, tests included,
// and fails naming each function over maxFuncLines lines (the standard in
// README.md): a long function is split by meaning, into functions whose
// names say what each part does.
func TestNoFunctionIsLong(t *testing.T) {
	root := moduleRoot(t)
	files := moduleGoFiles(t, root)
	require.Greater(t, len(files), 100, "the walk found the module's Go files")
	var found []longFunc
	for _, rel := range files {
		found = append(found, longFuncsIn(t, root, rel)...)
	}
	for _, f := range found {
		t.Errorf("%s: %s is %d lines, over %d: split it by meaning", f.where, f.key[strings.Index(f.key, ":")+1:], f.lines, maxFuncLines)
	}
}

// TestTheLengthCheckSeesALongFunction keeps TestNoFunctionIsLong honest:
// the parser it uses must report a function of 81 lines, and pass one of
// 80.
func TestTheLengthCheckSeesALongFunction(t *testing.T) {
	dir := t.TempDir()
	body := func(name string, lines int) string {
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	src := "package p\n\n" + body("fits", maxFuncLines) + "\ntype T struct{}\n\n" + strings.Replace(body("tooLong", maxFuncLines+1), "func tooLong", "func (T) tooLong", 1)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600))
	line := strings.Count(src[:strings.Index(src, "func (T) tooLong")], "\n") + 1
	got := longFuncsIn(t, dir, "p.go")
	require.Equal(t, []longFunc{{key: "p.go:T.tooLong", where: fmt.Sprintf("p.go:%d", line), lines: maxFuncLines + 1}}, got)
}

// moduleGoFiles lists the module's .go files relative to root, skipping
// what the go command skips (testdata, and directories starting with "."
// or "_") and the npm packages under interop.
func moduleGoFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (name == "testdata" || name == "node_modules" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	return files
}

// longFuncsIn parses root/rel and returns its functions over maxFuncLines.
func longFuncsIn(t *testing.T, root, rel string) []longFunc {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Join(root, rel), nil, parser.SkipObjectResolution)
	require.NoError(t, err, "parse %s", rel)
	var out []longFunc
	for _, decl := range f.Decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Body == nil {
			continue
		}
		first, last := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
		if n := last - first + 1; n > maxFuncLines {
			out = append(out, longFunc{key: rel + ":" + funcName(fn), where: fmt.Sprintf("%s:%d", rel, first), lines: n})
		}
	}
	return out
}

// funcName is a function's name, with its receiver's type for a method:
// "Report", "Run.Report".
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	switch x := typ.(type) {
	case *ast.IndexExpr:
		typ = x.X
	case *ast.IndexListExpr:
		typ = x.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
