package deploy

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/plane"
)

// The admin listener answers only the Hosts --admin-hosts and its defaults
// accept (against DNS rebinding), so whatever checks or scrapes it in a
// deployment must send one of them, or every replica looks down.

// answersHost reports whether relayd, configured as cfg, answers a request
// to its admin listener with this Host header.
func answersHost(cfg config.Config, host string) bool {
	return plane.NewAdminHosts(cfg.AdminHostNames()).Allow(host)
}

// haproxyCheckHost is the Host header of the backend's http-check, "" when
// it sends none.
func haproxyCheckHost(s *haproxySection) string {
	for _, l := range s.lines {
		if rest, ok := strings.CutPrefix(l, "http-check send "); ok {
			f := strings.Fields(rest)
			for i := 0; i+2 < len(f); i++ {
				if f[i] == "hdr" && strings.EqualFold(f[i+1], "Host") {
					return f[i+2]
				}
			}
		}
	}
	return ""
}

// TestComposeAdminListenerAnswersTheChecks: HAProxy checks /readyz with its
// own Host header, and the way the compose file tells operators to look at
// a replica's admin listener names the service.
func TestComposeAdminListenerAnswersTheChecks(t *testing.T) {
	p := loadCompose(t)
	hc := parseHAProxy(t, filepath.Join(repoRoot(t), "deploy", "haproxy", "haproxy.cfg"))
	backend, ok := hc.sections["backend relayd"]
	if !ok {
		t.Fatal("haproxy.cfg has no backend relayd")
	}
	checkHost := haproxyCheckHost(backend)
	if checkHost == "" {
		t.Fatal("haproxy's http-check sends no Host header; an HTTP/1.1 request without one is refused")
	}
	for _, s := range relaydServices(p) {
		where := "docker-compose.yml service " + s.Name
		cfg := loadConfig(t, where, s.Command, composeEnv(s))
		adminPort := strconv.Itoa(listenPort(t, where, cfg.AdminListen))
		for _, host := range []string{checkHost, s.Name + ":" + adminPort} {
			if !answersHost(cfg, host) {
				t.Errorf("%s: the admin listener refuses Host %q (haproxy's check, or wget http://%s:%s/readyz); list it in RELAYD_ADMIN_HOSTS", where, host, s.Name, adminPort)
			}
		}
		if answersHost(cfg, "evil.example") {
			t.Errorf("%s: the admin listener answers any Host; a DNS-rebinding page could read it", where)
		}
	}
}

// kubeletHost is the Host a kubelet's HTTP probe sends: its httpHeaders'
// Host, else its host (the pod IP when unset) and port.
func kubeletHost(pr *corev1.Probe, port int32) string {
	for _, h := range pr.HTTPGet.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			return h.Value
		}
	}
	host := pr.HTTPGet.Host
	if host == "" {
		host = "10.244.1.7" // a pod IP
	}
	return host + ":" + strconv.Itoa(int(port))
}

// TestKustomizeAdminListenerAnswersProbesAndScrapes: the kubelet's probes
// and Prometheus's annotation-discovered scrape both name the pod by its IP.
func TestKustomizeAdminListenerAnswersProbesAndScrapes(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov.name, func(t *testing.T) {
			m := render(t, filepath.Join(k8sDir, "overlays", ov.name))
			d, c := m.relayd(t)
			where := m.where + " Deployment/" + d.Name
			cfg := loadConfig(t, where, c.Args, m.env(t, c))
			adminPort := int32(listenPort(t, where, cfg.AdminListen))
			for name, pr := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe, "startup": c.StartupProbe} {
				if pr == nil || pr.HTTPGet == nil {
					continue
				}
				if host := kubeletHost(pr, adminPort); !answersHost(cfg, host) {
					t.Errorf("%s: the admin listener refuses the %s probe's Host %q", where, name, host)
				}
			}
			if port := d.Spec.Template.Annotations["prometheus.io/port"]; port != "" {
				if host := "10.244.1.7:" + port; !answersHost(cfg, host) {
					t.Errorf("%s: the admin listener refuses Prometheus's scrape Host %q", where, host)
				}
			}
			if answersHost(cfg, "evil.example") {
				t.Errorf("%s: the admin listener answers any Host; a DNS-rebinding page could read it", where)
			}
		})
	}
}
