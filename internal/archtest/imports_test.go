package archtest

import (
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const module = "github.com/byollm/relayd"

// allowed lists, for each production package, the relayd packages its
// non-test code may import. It is the diagram in docs/architecture.md as
// data: a new edge fails here until the two are changed together.
var allowed = map[string][]string{
	"clock":               {},
	"protocol/strictjson": {},
	"protocol":            {"protocol/strictjson"},
	"protocol/proto2":     {"protocol", "protocol/strictjson"},
	"projection":          {"protocol", "protocol/strictjson"},
	"pairing":             {"projection", "protocol", "protocol/strictjson", "store"},
	"store":               {"protocol"},
	"admission":           {"projection", "protocol", "protocol/proto2"},
	"ratelimit":           {"clock"},
	"metrics":             {"protocol", "store"},
	"store/memory":        {"clock", "protocol", "ratelimit", "store"},
	"store/lua":           {},
	"store/valkey":        {"clock", "protocol", "ratelimit", "store", "store/lua"},
	"store/backend":       {"clock", "ratelimit", "store", "store/memory", "store/valkey"},
	"plane/codec":         {"clock", "projection", "protocol", "ratelimit", "store"},
	"plane/codec0":        {"clock", "plane/codec", "projection", "protocol", "store"},
	"plane/codec2":        {"admission", "pairing", "plane/codec", "projection", "protocol", "protocol/proto2", "store"},
	"plane":               {"clock", "pairing", "plane/codec", "plane/codec0", "plane/codec2", "projection", "protocol", "protocol/proto2", "ratelimit", "store"},
	"config":              {"clock", "pairing", "projection", "protocol", "protocol/proto2", "ratelimit", "store/backend"},
	"server":              {"admission", "clock", "config", "metrics", "plane", "plane/codec2", "projection", "protocol", "protocol/proto2", "ratelimit", "store", "store/backend"},
	"cmd/relayd":          {"admission", "config", "pairing/approvecmd", "server"},
	"pairing/approvecmd":  {"pairing", "projection", "protocol"},
	"deploy":              {},
	// Contract suites, imported by the tests of what they check.
	"store/storetest":       {"protocol", "store"},
	"ratelimit/limitertest": {"ratelimit"},
	"internal/archtest":     {},
}

// harness reports whether a package exists only for tests, benchmarks and
// the demo: it may import production packages, but none may import it.
func harness(pkg string) bool {
	return strings.HasPrefix(pkg, "internal/") || pkg == "cmd/relaybench" || pkg == "cmd/opcost" || pkg == "cmd/relayd-demo"
}

// openedOnlyThroughBackend are the stores' own packages: past the store
// package itself, only store/backend chooses and opens one.
var openedOnlyThroughBackend = []string{"store/memory", "store/valkey"}

type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

func TestImportRules(t *testing.T) {
	for _, p := range listPackages(t) {
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		t.Run(pkg, func(t *testing.T) {
			own := ownImports(p.Imports)
			switch want, known := allowed[pkg]; {
			case known:
				for _, imp := range own {
					require.Contains(t, want, imp, "%s may not import %s (docs/architecture.md)", pkg, imp)
				}
			case harness(pkg):
				for _, imp := range own {
					require.False(t, slices.Contains(openedOnlyThroughBackend, imp), "%s opens a store through store/backend, not %s", pkg, imp)
				}
			default:
				require.Failf(t, "a package the rules do not know", "%s: add it to allowed and to docs/architecture.md", pkg)
			}
			if !strings.HasPrefix(pkg, "plane") || strings.HasPrefix(pkg, "plane/codec") {
				for _, imp := range slices.Concat(p.Imports, p.TestImports, p.XTestImports) {
					require.False(t, strings.HasPrefix(imp, "github.com/labstack/echo"), "echo stays inside plane; %s imports %s", pkg, imp)
				}
			}
			valkeyClient := slices.ContainsFunc(p.Imports, func(imp string) bool { return strings.HasPrefix(imp, "github.com/valkey-io/valkey-go") })
			require.False(t, valkeyClient && !harness(pkg) && pkg != "store/valkey", "only the Valkey store talks to Valkey; %s imports its client", pkg)
		})
	}
}

// ownImports returns the relayd packages among imports, relative to the
// module.
func ownImports(imports []string) []string {
	var out []string
	for _, imp := range imports {
		if rel, ok := strings.CutPrefix(imp, module+"/"); ok {
			out = append(out, rel)
		}
	}
	return out
}

// listPackages asks the go command for every package of the module.
func listPackages(t *testing.T) []listed {
	t.Helper()
	root, err := exec.Command("go", "env", "GOMOD").Output()
	require.NoError(t, err)
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(root)))
	out, err := cmd.Output()
	require.NoError(t, err, "go list")
	var pkgs []listed
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else {
			require.NoError(t, err)
		}
		pkgs = append(pkgs, p)
	}
	require.Greater(t, len(pkgs), 20, "go list found the module's packages")
	return pkgs
}
