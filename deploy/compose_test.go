package deploy

import (
	"bufio"
	"context"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/projection"
)

// The services of docker-compose.yml, by role.
const (
	composeValkey = "valkey"
	composeLB     = "lb"
	relaydImage   = "byollm/relayd"
)

// loadCompose loads docker-compose.yml as docker compose would, with no
// variables from this process's environment and paths resolved against the
// repository root.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	root := repoRoot(t)
	opts, err := cli.NewProjectOptions(
		[]string{filepath.Join(root, "docker-compose.yml")},
		cli.WithWorkingDirectory(root),
		cli.WithResolvedPaths(true),
		cli.WithConsistency(true),
	)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	p, err := opts.LoadProject(ctx)
	if err != nil {
		t.Fatalf("docker-compose.yml does not load: %v", err)
	}
	return p
}

// relaydServices are the services that run the relayd image.
func relaydServices(p *types.Project) []types.ServiceConfig {
	var out []types.ServiceConfig
	for _, name := range slices.Sorted(maps.Keys(p.Services)) {
		s := p.Services[name]
		if s.Image == relaydImage || strings.HasPrefix(s.Image, relaydImage+":") {
			out = append(out, s)
		}
	}
	return out
}

// composeEnv is a service's environment as relayd would read it.
func composeEnv(s types.ServiceConfig) map[string]string {
	env := map[string]string{}
	for k, v := range s.Environment {
		if v != nil {
			env[k] = *v
		}
	}
	return env
}

// argValue finds "--name value" or "--name=value" in a command line.
func argValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
	}
	return "", false
}

func TestComposeLoads(t *testing.T) {
	p := loadCompose(t)
	for _, name := range []string{composeValkey, composeLB} {
		if _, ok := p.Services[name]; !ok {
			t.Errorf("docker-compose.yml has no %q service", name)
		}
	}
	replicas := 0
	for _, s := range relaydServices(p) {
		replicas += s.GetScale()
	}
	if replicas != 3 {
		t.Errorf("docker-compose.yml runs %d relayd replicas, want 3", replicas)
	}
}

func TestComposeValkey(t *testing.T) {
	p := loadCompose(t)
	v, ok := p.Services[composeValkey]
	if !ok {
		t.Fatalf("no %q service", composeValkey)
	}
	if !strings.HasPrefix(v.Image, "valkey/valkey:") {
		t.Errorf("valkey image = %q, want valkey/valkey:<version>", v.Image)
	}
	cmd := []string(v.Command)
	if len(cmd) == 0 || cmd[0] != "valkey-server" {
		t.Errorf("valkey command = %q, want valkey-server with flags", cmd)
	}
	for flag, want := range map[string]string{"--appendonly": "yes", "--maxmemory-policy": "noeviction"} {
		if got, ok := argValue(cmd, flag); !ok || got != want {
			t.Errorf("valkey command: %s = %q, want %q", flag, got, want)
		}
	}

	hc := v.HealthCheck
	if hc == nil || hc.Disable {
		t.Fatal("valkey has no healthcheck")
	}
	test := strings.Join(hc.Test, " ")
	if !strings.Contains(test, "valkey-cli") || !strings.Contains(test, "ping") {
		t.Errorf("valkey healthcheck = %q, want a valkey-cli ping", test)
	}
	if hc.Interval == nil || hc.Retries == nil {
		t.Errorf("valkey healthcheck needs an interval and retries: %+v", hc)
	}

	var data *types.ServiceVolumeConfig
	for i, vol := range v.Volumes {
		if vol.Target == "/data" {
			data = &v.Volumes[i]
		}
	}
	switch {
	case data == nil:
		t.Error("valkey has no volume at /data: the AOF would not survive the container")
	case data.Type != types.VolumeTypeVolume:
		t.Errorf("valkey /data is a %s mount, want a named volume", data.Type)
	default:
		if _, ok := p.Volumes[data.Source]; !ok {
			t.Errorf("valkey volume %q is not declared under volumes:", data.Source)
		}
	}
	if len(v.Ports) != 0 {
		t.Errorf("valkey publishes ports %+v; it must stay on the compose network", v.Ports)
	}
}

func TestComposeRelayd(t *testing.T) {
	p := loadCompose(t)
	root := repoRoot(t)
	services := relaydServices(p)
	if len(services) == 0 {
		t.Fatalf("no service runs the %s image", relaydImage)
	}
	for _, s := range services {
		where := "docker-compose.yml service " + s.Name
		if s.Build == nil {
			t.Errorf("%s: no build section; it must build from the Dockerfile", where)
		} else {
			if s.Build.Context != root {
				t.Errorf("%s: build context %q, want the repository root %q", where, s.Build.Context, root)
			}
			df := s.Build.Dockerfile
			if df == "" {
				df = "Dockerfile"
			}
			if !filepath.IsAbs(df) {
				df = filepath.Join(s.Build.Context, df)
			}
			if df != filepath.Join(root, "Dockerfile") {
				t.Errorf("%s: builds %s, want the repository's Dockerfile", where, df)
			}
		}
		if len(s.Entrypoint) != 0 {
			t.Errorf("%s: overrides the image's entrypoint with %q", where, s.Entrypoint)
		}

		cfg := loadConfig(t, where, s.Command, composeEnv(s))
		if cfg.Store != config.StoreValkey {
			t.Errorf("%s: store = %q; replicas must share the valkey store", where, cfg.Store)
		}
		for _, addr := range cfg.Valkey.Addrs {
			host := strings.Split(addr, ":")[0]
			if _, ok := p.Services[host]; !ok {
				t.Errorf("%s: valkey address %q names no compose service", where, addr)
			}
		}
		if cfg.PublicDebug {
			t.Errorf("%s: the debug page must not be public", where)
		}
		for _, a := range []string{cfg.Listen, cfg.AdminListen} {
			if !listensOnAllInterfaces(a) {
				t.Errorf("%s: listens on %q; the load balancer could not reach it", where, a)
			}
		}
		publicPort := listenPort(t, where, cfg.Listen)
		adminPort := listenPort(t, where, cfg.AdminListen)
		for _, port := range []int{publicPort, adminPort} {
			if !slices.Contains([]string(s.Expose), strconv.Itoa(port)) {
				t.Errorf("%s: expose %q lacks port %d", where, s.Expose, port)
			}
		}

		if len(s.Ports) != 0 {
			t.Errorf("%s: publishes %+v; only the load balancer may publish a port", where, s.Ports)
		}

		dep, ok := s.DependsOn[composeValkey]
		if !ok || dep.Condition != types.ServiceConditionHealthy {
			t.Errorf("%s: depends_on valkey = %+v, want condition %s", where, dep, types.ServiceConditionHealthy)
		}

		if s.StopGracePeriod == nil || time.Duration(*s.StopGracePeriod) <= cfg.ShutdownTimeout {
			t.Errorf("%s: stop_grace_period must be longer than the shutdown timeout %s, or docker kills a draining replica", where, cfg.ShutdownTimeout)
		}
		if !s.ReadOnly {
			t.Errorf("%s: read_only is not set", where)
		}
		if !slices.Contains(s.CapDrop, "ALL") {
			t.Errorf("%s: cap_drop does not drop ALL", where)
		}

		checkComposeFixture(t, where, s, cfg)
	}
}

// checkComposeFixture: the fixture relayd is told to load is the example,
// bind-mounted read-only, and it registers relayd's site.
func checkComposeFixture(t *testing.T, where string, s types.ServiceConfig, cfg config.Config) {
	t.Helper()
	want := filepath.Join(repoRoot(t), "deploy", "fixture.example.json")
	var mount *types.ServiceVolumeConfig
	for i, v := range s.Volumes {
		if v.Target == cfg.Fixture {
			mount = &s.Volumes[i]
		}
	}
	if mount == nil {
		t.Errorf("%s: nothing is mounted at the fixture path %q", where, cfg.Fixture)
		return
	}
	if mount.Type != types.VolumeTypeBind || mount.Source != want {
		t.Errorf("%s: fixture mount is %s %q, want a bind of %q", where, mount.Type, mount.Source, want)
	}
	if !mount.ReadOnly {
		t.Errorf("%s: the fixture is not mounted read-only", where)
	}
	data, err := os.ReadFile(mount.Source)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	proj, err := projection.FromJSON(data)
	if err != nil {
		t.Errorf("%s: the mounted fixture does not load: %v", where, err)
		return
	}
	if _, ok := proj.SiteFor(cfg.SiteID); !ok {
		t.Errorf("%s: the fixture does not register site %q", where, cfg.SiteID)
	}
}

func TestComposeLoadBalancer(t *testing.T) {
	p := loadCompose(t)
	root := repoRoot(t)
	lb, ok := p.Services[composeLB]
	if !ok {
		t.Fatalf("no %q service", composeLB)
	}
	if !strings.HasPrefix(lb.Image, "haproxy:") {
		t.Errorf("lb image = %q, want haproxy (deploy/haproxy/haproxy.cfg is its config)", lb.Image)
	}

	services := relaydServices(p)
	for _, s := range services {
		if _, ok := lb.DependsOn[s.Name]; !ok {
			t.Errorf("lb does not depend on %s", s.Name)
		}
	}
	if lb.HealthCheck == nil || lb.HealthCheck.Disable || len(lb.HealthCheck.Test) == 0 {
		t.Error("lb has no healthcheck")
	}

	cfgPath := filepath.Join(root, "deploy", "haproxy", "haproxy.cfg")
	mounted := false
	for _, v := range lb.Volumes {
		if v.Type == types.VolumeTypeBind && v.Source == cfgPath && v.ReadOnly {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("lb does not mount %s read-only", cfgPath)
	}

	hc := parseHAProxy(t, cfgPath)
	if len(lb.Ports) != 1 {
		t.Fatalf("lb publishes %d ports %+v, want exactly the public one", len(lb.Ports), lb.Ports)
	}
	pub := lb.Ports[0]
	if pub.Published == "" {
		t.Errorf("lb port %+v is not published to the host", pub)
	}
	front, ok := hc.frontendOnPort(int(pub.Target))
	if !ok {
		t.Fatalf("haproxy.cfg has no frontend bound to the published port %d", pub.Target)
	}
	backendName, _ := front.first("default_backend")
	backend, ok := hc.sections["backend "+backendName]
	if !ok {
		t.Fatalf("published frontend %q has no backend %q", front.name, backendName)
	}
	if v, _ := backend.first("balance"); v != "roundrobin" {
		t.Errorf("backend %s balances %q, want roundrobin", backendName, v)
	}
	if !front.hasMatch(func(l string) bool { return strings.HasPrefix(l, "http-request deny") && strings.Contains(l, "/debug") }) {
		t.Error("the public frontend does not refuse /debug")
	}
	if front.has("stats") {
		t.Error("the public frontend serves HAProxy's stats page")
	}
	checkLBServers(t, backend, backendName, services)
}

// checkLBServers: HAProxy's public backend holds every relayd replica on
// its public port, checks each on its admin port with GET /readyz and
// wants a 200, and never sends traffic to an admin port.
func checkLBServers(t *testing.T, backend *haproxySection, backendName string, services []types.ServiceConfig) {
	servers := backend.servers()
	if len(servers) == 0 {
		t.Fatalf("backend %s has no servers", backendName)
	}
	for _, s := range services {
		cfg := loadConfig(t, "docker-compose.yml service "+s.Name, s.Command, composeEnv(s))
		publicPort := listenPort(t, s.Name, cfg.Listen)
		adminPort := listenPort(t, s.Name, cfg.AdminListen)
		want := s.Name + ":" + strconv.Itoa(publicPort)
		found := false
		for _, srv := range servers {
			if srv.addr == want {
				found = true
				if srv.checkPort != adminPort {
					t.Errorf("haproxy checks %s on port %d, want the admin port %d", want, srv.checkPort, adminPort)
				}
			}
			if strings.HasSuffix(srv.addr, ":"+strconv.Itoa(adminPort)) {
				t.Errorf("haproxy sends traffic to the admin port: %s", srv.addr)
			}
		}
		if !found {
			t.Errorf("haproxy backend %s has no server %s (got %+v)", backendName, want, servers)
		}
	}
	if !backend.hasMatch(func(l string) bool { return strings.HasPrefix(l, "option httpchk") }) ||
		!backend.hasMatch(func(l string) bool {
			return strings.HasPrefix(l, "http-check send") && strings.Contains(l, "uri /readyz")
		}) {
		t.Error("haproxy does not check GET /readyz")
	}
	if !backend.hasMatch(func(l string) bool { return l == "http-check expect status 200" }) {
		t.Error("haproxy does not require 200 from /readyz")
	}
}

// TestComposeNoAdminPortPublished: nothing on the host reaches an admin
// listener, Valkey or HAProxy's internal endpoints.
func TestComposeNoAdminPortPublished(t *testing.T) {
	p := loadCompose(t)
	private := map[uint32]string{6379: "valkey", 8404: "haproxy health"}
	for _, s := range relaydServices(p) {
		cfg := loadConfig(t, s.Name, s.Command, composeEnv(s))
		private[uint32(listenPort(t, s.Name, cfg.AdminListen))] = "relayd admin"
	}
	for name, s := range p.Services {
		for _, port := range s.Ports {
			if what, ok := private[port.Target]; ok {
				t.Errorf("service %s publishes container port %d (%s) to the host", name, port.Target, what)
			}
		}
	}
}

// haproxyConfig is haproxy.cfg as sections of directive lines.
type haproxyConfig struct {
	sections map[string]*haproxySection
}

type haproxySection struct {
	name  string
	lines []string
}

type haproxyServer struct {
	addr      string
	checkPort int
}

func parseHAProxy(t *testing.T, path string) haproxyConfig {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg := haproxyConfig{sections: map[string]*haproxySection{}}
	var cur *haproxySection
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		raw := sc.Text()
		line := raw
		if i := strings.Index(line, "#"); i >= 0 {
			line = line[:i]
		}
		line = strings.Join(strings.Fields(line), " ")
		if line == "" {
			continue
		}
		if raw[0] != ' ' && raw[0] != '\t' {
			cur = &haproxySection{name: line}
			cfg.sections[line] = cur
			continue
		}
		if cur == nil {
			t.Fatalf("%s: directive %q outside a section", path, line)
		}
		cur.lines = append(cur.lines, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return cfg
}

func (c haproxyConfig) frontendOnPort(port int) (*haproxySection, bool) {
	for name, s := range c.sections {
		if !strings.HasPrefix(name, "frontend ") {
			continue
		}
		for _, l := range s.lines {
			if addr, ok := strings.CutPrefix(l, "bind "); ok {
				addr = strings.Fields(addr)[0]
				if strings.HasSuffix(addr, ":"+strconv.Itoa(port)) {
					return s, true
				}
			}
		}
	}
	return nil, false
}

func (s *haproxySection) first(keyword string) (string, bool) {
	for _, l := range s.lines {
		if v, ok := strings.CutPrefix(l, keyword+" "); ok {
			return v, true
		}
	}
	return "", false
}

func (s *haproxySection) has(prefix string) bool {
	return s.hasMatch(func(l string) bool { return strings.HasPrefix(l, prefix) })
}

func (s *haproxySection) hasMatch(match func(string) bool) bool {
	return slices.ContainsFunc(s.lines, match)
}

// servers lists server and server-template lines with the port their
// health checks use (from the line or default-server).
func (s *haproxySection) servers() []haproxyServer {
	defaultCheck := 0
	for _, l := range s.lines {
		if rest, ok := strings.CutPrefix(l, "default-server "); ok {
			defaultCheck = checkPortOf(strings.Fields(rest), 0)
		}
	}
	var out []haproxyServer
	for _, l := range s.lines {
		f := strings.Fields(l)
		var addr string
		var opts []string
		switch {
		case f[0] == "server" && len(f) >= 3:
			addr, opts = f[2], f[3:]
		case f[0] == "server-template" && len(f) >= 4:
			addr, opts = f[3], f[4:]
		default:
			continue
		}
		check := defaultCheck
		if check == 0 {
			// Without "port", HAProxy checks the traffic port.
			check, _ = strconv.Atoi(addr[strings.LastIndex(addr, ":")+1:])
		}
		out = append(out, haproxyServer{addr: addr, checkPort: checkPortOf(opts, check)})
	}
	return out
}

// checkPortOf reads "port N" from server options; def if absent.
func checkPortOf(opts []string, def int) int {
	for i := 0; i+1 < len(opts); i++ {
		if opts[i] == "port" {
			if n, err := strconv.Atoi(opts[i+1]); err == nil {
				return n
			}
		}
	}
	return def
}
