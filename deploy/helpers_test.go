package deploy

import (
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/byollm/relayd/config"
)

// repoRoot is the module root, one level above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod above the deploy package: %v", err)
	}
	return root
}

// nonRelaydEnv are environment variables a deployment may set for the Go
// runtime or TLS roots rather than for relayd; anything else that is not a
// RELAYD_* setting is a typo or a leftover.
var nonRelaydEnv = map[string]bool{
	"GOMAXPROCS":    true,
	"GOMEMLIMIT":    true,
	"SSL_CERT_FILE": true,
	"SSL_CERT_DIR":  true,
	"TZ":            true,
}

// knownSettings indexes config.Settings by environment name and flag name.
func knownSettings(t *testing.T) (byEnv, byFlag map[string]config.Setting) {
	t.Helper()
	byEnv, byFlag = map[string]config.Setting{}, map[string]config.Setting{}
	for _, s := range config.Settings() {
		byEnv[s.Env] = s
		byFlag[s.Flag] = s
	}
	if len(byEnv) == 0 {
		t.Fatal("config.Settings() is empty")
	}
	return byEnv, byFlag
}

// checkEnvNames fails for every name that relayd would not read.
func checkEnvNames(t *testing.T, where string, names []string) {
	t.Helper()
	byEnv, _ := knownSettings(t)
	for _, n := range names {
		if nonRelaydEnv[n] {
			continue
		}
		if _, ok := byEnv[n]; !ok {
			t.Errorf("%s: environment variable %s is not a relayd setting (config.Settings)", where, n)
		}
	}
}

// checkArgs fails for every --flag that relayd does not define. Values of
// non-boolean flags given as a separate argument are skipped.
func checkArgs(t *testing.T, where string, args []string) {
	t.Helper()
	_, byFlag := knownSettings(t)
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			t.Errorf("%s: argument %q is not a flag; relayd takes no positional arguments", where, a)
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if _, ok := byFlag[name]; !ok {
			t.Errorf("%s: flag --%s is not a relayd setting (config.Settings)", where, name)
			continue
		}
		if !hasValue && !isBoolFlag(name) && i+1 < len(args) {
			i++
		}
	}
}

// isBoolFlag asks relayd's own flag parser whether --name stands alone: a
// flag that needs a value fails to parse without one, while a boolean one
// parses and only the validation that follows may complain.
func isBoolFlag(name string) bool {
	_, err := config.Load([]string{"--" + name}, func(string) string { return "" })
	return err == nil || !strings.HasPrefix(err.Error(), "parse flags:")
}

// loadConfig runs relayd's own configuration loader on args and env, the
// way the relayd binary would see them.
func loadConfig(t *testing.T, where string, args []string, env map[string]string) config.Config {
	t.Helper()
	names := make([]string, 0, len(env))
	for k := range env {
		names = append(names, k)
	}
	sort.Strings(names)
	checkEnvNames(t, where, names)
	checkArgs(t, where, args)
	cfg, err := config.Load(args, func(k string) string { return env[k] })
	if err != nil {
		t.Fatalf("%s: relayd would refuse this configuration: %v", where, err)
	}
	return cfg
}

// listenPort is the port of a listen address such as ":8080" or
// "127.0.0.1:9090".
func listenPort(t *testing.T, where, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: listen address %q: %v", where, addr, err)
	}
	n, err := strconv.Atoi(p)
	if err != nil || n <= 0 || n > 65535 {
		t.Fatalf("%s: listen address %q has no fixed port", where, addr)
	}
	return n
}

// listensOnAllInterfaces reports whether addr is reachable from outside the
// container (no host, or a wildcard host).
func listensOnAllInterfaces(addr string) bool {
	h, _, err := net.SplitHostPort(addr)
	return err == nil && (h == "" || h == "0.0.0.0" || h == "::")
}
