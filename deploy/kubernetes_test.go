package deploy

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/byollm/relayd/config"
	"github.com/byollm/relayd/projection"
)

const (
	k8sDir           = "kubernetes"
	relaydName       = "relayd"
	relaydContainer  = "relayd"
	fixtureConfigMap = "relayd-fixture"
)

// overlay is what each kustomize overlay must add up to.
type overlay struct {
	name      string
	namespace string
	replicas  int32
	// inClusterValkey: Valkey runs as a StatefulSet in the overlay;
	// otherwise it is external and reached over TLS.
	inClusterValkey bool
}

var overlays = []overlay{
	{name: "dev", namespace: "relayd-dev", replicas: 2, inClusterValkey: true},
	{name: "prod", namespace: "relayd", replicas: 3, inClusterValkey: false},
}

// scheme knows every API type the manifests may use; an object of any other
// kind or version fails the test.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, policyv1.AddToScheme,
		autoscalingv2.AddToScheme, networkingv1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// manifests is one rendered kustomization, decoded into API types.
type manifests struct {
	where        string
	namespaces   []*corev1.Namespace
	configMaps   map[string]*corev1.ConfigMap
	secrets      []*corev1.Secret
	services     []*corev1.Service
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	netpols      []*networkingv1.NetworkPolicy
	objects      []metav1.Object
}

// render builds dir (relative to this package) with kustomize, as
// `kubectl kustomize` would, and decodes every object strictly: an unknown
// or misplaced field is an error, as is a kind the scheme does not know.
func render(t *testing.T, dir string) *manifests {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatal(err)
	}
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	rm, err := k.Run(filesys.MakeFsOnDisk(), abs)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	m := &manifests{where: dir, configMaps: map[string]*corev1.ConfigMap{}}
	for _, r := range rm.Resources() {
		gvk := r.GetGvk()
		id := fmt.Sprintf("%s %s/%s", dir, gvk.Kind, r.GetName())
		y, err := r.AsYAML()
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		obj, err := scheme.New(schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind})
		if err != nil {
			t.Errorf("%s: %s is not a known API type: %v", id, gvk.ApiVersion(), err)
			continue
		}
		if err := yaml.UnmarshalStrict(y, obj); err != nil {
			t.Errorf("%s: does not decode strictly into %T: %v", id, obj, err)
			continue
		}
		meta, ok := obj.(metav1.Object)
		if !ok {
			t.Errorf("%s: %T has no object metadata", id, obj)
			continue
		}
		m.objects = append(m.objects, meta)
		switch o := obj.(type) {
		case *corev1.Namespace:
			m.namespaces = append(m.namespaces, o)
		case *corev1.ConfigMap:
			m.configMaps[o.Name] = o
		case *corev1.Secret:
			m.secrets = append(m.secrets, o)
		case *corev1.Service:
			m.services = append(m.services, o)
		case *appsv1.Deployment:
			m.deployments = append(m.deployments, o)
		case *appsv1.StatefulSet:
			m.statefulSets = append(m.statefulSets, o)
		case *policyv1.PodDisruptionBudget:
			m.pdbs = append(m.pdbs, o)
		case *autoscalingv2.HorizontalPodAutoscaler:
			m.hpas = append(m.hpas, o)
		case *networkingv1.NetworkPolicy:
			m.netpols = append(m.netpols, o)
		}
	}
	if len(m.objects) == 0 {
		t.Fatalf("%s renders no objects", dir)
	}
	return m
}

// relayd returns the relayd Deployment and its relayd container.
func (m *manifests) relayd(t *testing.T) (*appsv1.Deployment, *corev1.Container) {
	t.Helper()
	var d *appsv1.Deployment
	for _, dep := range m.deployments {
		if dep.Name == relaydName {
			d = dep
		}
	}
	if d == nil {
		t.Fatalf("%s: no Deployment %q", m.where, relaydName)
	}
	for i := range d.Spec.Template.Spec.Containers {
		if c := &d.Spec.Template.Spec.Containers[i]; c.Name == relaydContainer {
			return d, c
		}
	}
	t.Fatalf("%s: Deployment %s has no container %q", m.where, d.Name, relaydContainer)
	return nil, nil
}

// env resolves a container's environment the way the kubelet would, from
// literal values and from ConfigMaps and Secrets in the same render. A Secret
// that is not rendered (prod's credentials are created out of band) stands
// in with a placeholder, or is left out when the reference is optional.
func (m *manifests) env(t *testing.T, c *corev1.Container) map[string]string {
	t.Helper()
	if len(c.EnvFrom) != 0 {
		t.Errorf("%s: container %s uses envFrom; name every variable so it can be checked", m.where, c.Name)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		if _, dup := env[e.Name]; dup {
			t.Errorf("%s: %s is set twice", m.where, e.Name)
		}
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.Value != "":
			t.Errorf("%s: %s has both value and valueFrom", m.where, e.Name)
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			cm, ok := m.configMaps[ref.Name]
			v, has := "", false
			if ok {
				v, has = cm.Data[ref.Key]
			}
			switch {
			case has:
				env[e.Name] = v
			case ref.Optional == nil || !*ref.Optional:
				t.Errorf("%s: %s refers to ConfigMap %s key %s, which the overlay does not render", m.where, e.Name, ref.Name, ref.Key)
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			if ref.Optional == nil || !*ref.Optional {
				env[e.Name] = "placeholder-from-secret-" + ref.Name
			}
		default:
			t.Errorf("%s: %s uses a valueFrom this test cannot resolve", m.where, e.Name)
		}
	}
	return env
}

func TestKustomizeBase(t *testing.T) {
	m := render(t, filepath.Join(k8sDir, "base"))
	d, _ := m.relayd(t)
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 3 {
		t.Errorf("base: relayd replicas = %s, want 3", show(d.Spec.Replicas))
	}
	for _, w := range workloads(m) {
		checkRestricted(t, m.where+" "+w.kind+"/"+w.name, w.pod)
	}
	for _, o := range m.objects {
		if o.GetNamespace() != "" {
			t.Errorf("base: %s sets namespace %q; overlays choose it", o.GetName(), o.GetNamespace())
		}
	}
}

// TestKustomizeFixtureCopy: kustomize reads only files inside a
// kustomization's tree, so the base carries a copy of the example fixture.
// It must not drift from the original.
func TestKustomizeFixtureCopy(t *testing.T) {
	orig, err := os.ReadFile("fixture.example.json")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile(filepath.Join(k8sDir, "base", "fixture.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(orig, cp) {
		t.Error("deploy/kubernetes/base/fixture.json differs from deploy/fixture.example.json; copy it again")
	}
}

func TestKustomizeOverlays(t *testing.T) {
	for _, ov := range overlays {
		t.Run(ov.name, func(t *testing.T) {
			m := render(t, filepath.Join(k8sDir, "overlays", ov.name))
			d, c := m.relayd(t)
			where := m.where + " Deployment/" + d.Name

			if len(c.Command) != 0 {
				t.Errorf("%s: command %q overrides the image's entrypoint", where, c.Command)
			}
			cfg := loadConfig(t, where, c.Args, m.env(t, c))

			if d.Spec.Replicas == nil || *d.Spec.Replicas != ov.replicas {
				t.Errorf("%s: replicas = %s, want %d", where, show(d.Spec.Replicas), ov.replicas)
			}
			if cfg.Store != config.StoreValkey {
				t.Errorf("%s: store = %q; replicas must share the valkey store", where, cfg.Store)
			}
			if cfg.PublicDebug {
				t.Errorf("%s: the debug page must not be public", where)
			}
			checkNamespaces(t, m, ov.namespace)
			checkSelectors(t, m, d)
			ports := checkRelaydPorts(t, where, c, cfg)
			checkDrain(t, where, d, c, cfg)
			checkFixtureMount(t, m, d, c, cfg)
			for _, w := range workloads(m) {
				checkRestricted(t, m.where+" "+w.kind+"/"+w.name, w.pod)
			}
			checkService(t, m, d, ports)
			checkPDB(t, m, d)
			checkHPA(t, m, d)
			checkNetworkPolicy(t, m, d, c, ports)
			checkValkey(t, m, ov, c, cfg)
			if len(m.secrets) != 0 {
				t.Errorf("%s renders a Secret; credentials are created out of band, never committed", m.where)
			}
			if ov.name == "prod" {
				if strings.HasSuffix(c.Image, ":latest") || strings.HasSuffix(c.Image, ":dev") || !strings.Contains(c.Image, ":") && !strings.Contains(c.Image, "@") {
					t.Errorf("%s: image %q is not pinned to a release", where, c.Image)
				}
			}
		})
	}
}

// relaydPorts are the container's public and admin ports.
type relaydPorts struct{ public, admin int32 }

func checkRelaydPorts(t *testing.T, where string, c *corev1.Container, cfg config.Config) relaydPorts {
	t.Helper()
	p := relaydPorts{public: int32(listenPort(t, where, cfg.Listen)), admin: int32(listenPort(t, where, cfg.AdminListen))}
	for _, a := range []string{cfg.Listen, cfg.AdminListen} {
		if !listensOnAllInterfaces(a) {
			t.Errorf("%s: relayd listens on %q, which the kubelet and Services cannot reach", where, a)
		}
	}
	declared := map[int32]bool{}
	for _, cp := range c.Ports {
		declared[cp.ContainerPort] = true
		if cp.ContainerPort != p.public && cp.ContainerPort != p.admin {
			t.Errorf("%s: container port %d (%s) is neither relayd's public port %d nor its admin port %d", where, cp.ContainerPort, cp.Name, p.public, p.admin)
		}
	}
	if !declared[p.public] || !declared[p.admin] {
		t.Errorf("%s: container ports %+v must declare %d and %d", where, c.Ports, p.public, p.admin)
	}

	checkProbe := func(name string, pr *corev1.Probe, wantPath string) {
		if pr == nil {
			t.Errorf("%s: no %s probe", where, name)
			return
		}
		if pr.HTTPGet == nil {
			t.Errorf("%s: %s probe is not an HTTP GET (the image has no shell)", where, name)
			return
		}
		if pr.HTTPGet.Path != wantPath {
			t.Errorf("%s: %s probe path %q, want %q", where, name, pr.HTTPGet.Path, wantPath)
		}
		if got, ok := resolvePort(c, pr.HTTPGet.Port); !ok || got != p.admin {
			t.Errorf("%s: %s probe port %s resolves to %d, want the admin port %d", where, name, pr.HTTPGet.Port.String(), got, p.admin)
		}
	}
	checkProbe("readiness", c.ReadinessProbe, "/readyz")
	checkProbe("liveness", c.LivenessProbe, "/healthz")
	if c.StartupProbe != nil {
		checkProbe("startup", c.StartupProbe, "/healthz")
	}
	return p
}

// show prints an optional number.
func show[T int32 | int64](p *T) string {
	if p == nil {
		return "unset"
	}
	return fmt.Sprint(*p)
}

// resolvePort turns a named or numbered port into the container port.
func resolvePort(c *corev1.Container, p intstr.IntOrString) (int32, bool) {
	if p.Type == intstr.Int {
		return p.IntVal, p.IntVal > 0
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return cp.ContainerPort, true
		}
	}
	return 0, false
}

// checkDrain: stopping a pod must give relayd the time its drain needs.
// preStop sleeps while the endpoint is withdrawn, then SIGTERM starts the
// drain of up to --shutdown-timeout; the grace period must cover both.
func checkDrain(t *testing.T, where string, d *appsv1.Deployment, c *corev1.Container, cfg config.Config) {
	t.Helper()
	var sleep int64
	switch {
	case c.Lifecycle == nil || c.Lifecycle.PreStop == nil:
		t.Errorf("%s: no preStop hook; traffic would still arrive after SIGTERM", where)
	case c.Lifecycle.PreStop.Exec != nil:
		t.Errorf("%s: preStop runs a command; the distroless image has no shell or sleep binary", where)
	case c.Lifecycle.PreStop.Sleep == nil:
		t.Errorf("%s: preStop is not a sleep action", where)
	default:
		sleep = c.Lifecycle.PreStop.Sleep.Seconds
		if sleep < 5 {
			t.Errorf("%s: preStop sleeps %ds; endpoints need a few seconds to be withdrawn", where, sleep)
		}
	}
	grace := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	need := sleep + int64(cfg.ShutdownTimeout.Seconds())
	if grace == nil || *grace <= need {
		t.Errorf("%s: terminationGracePeriodSeconds = %s, must exceed preStop %ds + shutdown timeout %s", where, show(grace), sleep, cfg.ShutdownTimeout)
	}
	if s := d.Spec.Strategy.RollingUpdate; s == nil || s.MaxUnavailable == nil || s.MaxUnavailable.IntValue() != 0 {
		t.Errorf("%s: a rolling update may take a replica down before its replacement is ready", where)
	}
}

// checkFixtureMount: the fixture is a ConfigMap mounted as a directory, so
// updates arrive by the kubelet's symlink swap; subPath would freeze it.
func checkFixtureMount(t *testing.T, m *manifests, d *appsv1.Deployment, c *corev1.Container, cfg config.Config) {
	t.Helper()
	where := m.where + " Deployment/" + d.Name
	dir, file := path.Split(cfg.Fixture)
	dir = path.Clean(dir)
	var mount *corev1.VolumeMount
	for i, vm := range c.VolumeMounts {
		if path.Clean(vm.MountPath) == dir {
			mount = &c.VolumeMounts[i]
		}
		if vm.SubPath != "" || vm.SubPathExpr != "" {
			t.Errorf("%s: volume %s is mounted with subPath; it would never see an update", where, vm.Name)
		}
	}
	if mount == nil {
		t.Errorf("%s: no volume is mounted at the fixture's directory %s", where, dir)
		return
	}
	if !mount.ReadOnly {
		t.Errorf("%s: the fixture volume is writable", where)
	}
	var vol *corev1.Volume
	for i, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == mount.Name {
			vol = &d.Spec.Template.Spec.Volumes[i]
		}
	}
	if vol == nil || vol.ConfigMap == nil {
		t.Errorf("%s: the fixture volume %q is not a ConfigMap", where, mount.Name)
		return
	}
	if len(vol.ConfigMap.Items) != 0 {
		t.Errorf("%s: the fixture volume remaps keys; mount the ConfigMap whole", where)
	}
	if vol.ConfigMap.Name != fixtureConfigMap {
		t.Errorf("%s: the fixture ConfigMap is %q, want %q without a hash suffix, so it updates in place", where, vol.ConfigMap.Name, fixtureConfigMap)
	}
	cm, ok := m.configMaps[vol.ConfigMap.Name]
	if !ok {
		t.Errorf("%s: ConfigMap %s is not rendered", where, vol.ConfigMap.Name)
		return
	}
	data, ok := cm.Data[file]
	if !ok {
		t.Errorf("%s: ConfigMap %s has no key %q for RELAYD_FIXTURE=%s", where, cm.Name, file, cfg.Fixture)
		return
	}
	proj, err := projection.FromJSON([]byte(data))
	if err != nil {
		t.Errorf("%s: the fixture in ConfigMap %s does not load: %v", where, cm.Name, err)
		return
	}
	if _, ok := proj.SiteFor(cfg.SiteID); !ok {
		t.Errorf("%s: the fixture does not register RELAYD_SITE_ID %q", where, cfg.SiteID)
	}
}

type workload struct {
	kind, name string
	pod        *corev1.PodSpec
}

func workloads(m *manifests) []workload {
	var out []workload
	for _, d := range m.deployments {
		out = append(out, workload{"Deployment", d.Name, &d.Spec.Template.Spec})
	}
	for _, s := range m.statefulSets {
		out = append(out, workload{"StatefulSet", s.Name, &s.Spec.Template.Spec})
	}
	return out
}

// checkRestricted: every pod meets the "restricted" Pod Security Standard
// the namespaces enforce, has a read-only root file system, and sets
// resources.
func checkRestricted(t *testing.T, where string, pod *corev1.PodSpec) {
	t.Helper()
	psc := pod.SecurityContext
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	if pod.HostNetwork || pod.HostPID || pod.HostIPC {
		t.Errorf("%s: uses a host namespace", where)
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		t.Errorf("%s: mounts a service account token it does not need", where)
	}
	for _, c := range append(slices.Clone(pod.InitContainers), pod.Containers...) {
		cw := where + " container " + c.Name
		sc := c.SecurityContext
		if sc == nil {
			t.Errorf("%s: no securityContext", cw)
			continue
		}
		nonRoot := (sc.RunAsNonRoot != nil && *sc.RunAsNonRoot) || (sc.RunAsNonRoot == nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
		if !nonRoot {
			t.Errorf("%s: runAsNonRoot is not set", cw)
		}
		for _, uid := range []*int64{sc.RunAsUser, psc.RunAsUser} {
			if uid != nil && *uid == 0 {
				t.Errorf("%s: runs as uid 0", cw)
			}
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("%s: allowPrivilegeEscalation is not false", cw)
		}
		if sc.Privileged != nil && *sc.Privileged {
			t.Errorf("%s: privileged", cw)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			t.Errorf("%s: readOnlyRootFilesystem is not true", cw)
		}
		if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("%s: capabilities do not drop ALL", cw)
		} else if len(sc.Capabilities.Add) != 0 {
			t.Errorf("%s: adds capabilities %v", cw, sc.Capabilities.Add)
		}
		seccomp := sc.SeccompProfile
		if seccomp == nil {
			seccomp = psc.SeccompProfile
		}
		if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
			t.Errorf("%s: seccomp profile is not RuntimeDefault", cw)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				t.Errorf("%s: no %s request", cw, r)
			}
		}
		if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory limit", cw)
		} else if req := c.Resources.Requests[corev1.ResourceMemory]; lim.Cmp(req) < 0 {
			t.Errorf("%s: memory limit %s is below the request %s", cw, lim.String(), req.String())
		}
	}
}

func checkNamespaces(t *testing.T, m *manifests, want string) {
	t.Helper()
	found := false
	for _, ns := range m.namespaces {
		if ns.Name == want {
			found = true
			if ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
				t.Errorf("%s: Namespace %s does not enforce the restricted Pod Security Standard", m.where, want)
			}
		}
	}
	if !found {
		t.Errorf("%s: no Namespace %s", m.where, want)
	}
	for _, o := range m.objects {
		if _, isNS := o.(*corev1.Namespace); isNS {
			continue
		}
		if o.GetNamespace() != want {
			t.Errorf("%s: %s is in namespace %q, want %q", m.where, o.GetName(), o.GetNamespace(), want)
		}
	}
}

// selects reports whether sel picks the pods of d.
func selects(t *testing.T, sel *metav1.LabelSelector, d *appsv1.Deployment) bool {
	t.Helper()
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("bad selector %+v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(d.Spec.Template.Labels))
}

func checkSelectors(t *testing.T, m *manifests, d *appsv1.Deployment) {
	t.Helper()
	if !selects(t, d.Spec.Selector, d) {
		t.Errorf("%s: Deployment %s's selector does not match its own pods", m.where, d.Name)
	}
}

// checkService: Services reach relayd's public port and never its admin port.
func checkService(t *testing.T, m *manifests, d *appsv1.Deployment, ports relaydPorts) {
	t.Helper()
	_, c := m.relayd(t)
	n := 0
	for _, svc := range m.services {
		if svc.Spec.Selector == nil || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		n++
		for _, sp := range svc.Spec.Ports {
			target := sp.TargetPort
			if target.Type == intstr.Int && target.IntVal == 0 {
				target = intstr.FromInt32(sp.Port)
			}
			got, ok := resolvePort(c, target)
			if !ok || got != ports.public {
				t.Errorf("%s: Service %s port %s targets %d, want only the public port %d", m.where, svc.Name, sp.Name, got, ports.public)
			}
		}
	}
	if n == 0 {
		t.Errorf("%s: no Service selects the relayd pods", m.where)
	}
}

func checkPDB(t *testing.T, m *manifests, d *appsv1.Deployment) {
	t.Helper()
	var pdb *policyv1.PodDisruptionBudget
	for _, p := range m.pdbs {
		if selects(t, p.Spec.Selector, d) {
			pdb = p
		}
	}
	if pdb == nil {
		t.Errorf("%s: no PodDisruptionBudget selects the relayd pods", m.where)
		return
	}
	switch {
	case pdb.Spec.MaxUnavailable != nil:
		if pdb.Spec.MaxUnavailable.Type == intstr.Int && pdb.Spec.MaxUnavailable.IntVal < 1 {
			t.Errorf("%s: PDB %s allows no disruption; node drains would hang", m.where, pdb.Name)
		}
	case pdb.Spec.MinAvailable != nil:
		if pdb.Spec.MinAvailable.Type == intstr.Int && d.Spec.Replicas != nil && pdb.Spec.MinAvailable.IntVal >= *d.Spec.Replicas {
			t.Errorf("%s: PDB %s minAvailable %d leaves no replica evictable", m.where, pdb.Name, pdb.Spec.MinAvailable.IntVal)
		}
	default:
		t.Errorf("%s: PDB %s sets neither maxUnavailable nor minAvailable", m.where, pdb.Name)
	}
}

func checkHPA(t *testing.T, m *manifests, d *appsv1.Deployment) {
	t.Helper()
	var hpa *autoscalingv2.HorizontalPodAutoscaler
	for _, h := range m.hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.Kind == "Deployment" && ref.Name == d.Name && ref.APIVersion == "apps/v1" {
			hpa = h
		}
	}
	if hpa == nil {
		t.Errorf("%s: no HorizontalPodAutoscaler targets Deployment %s", m.where, d.Name)
		return
	}
	minR := int32(1)
	if hpa.Spec.MinReplicas != nil {
		minR = *hpa.Spec.MinReplicas
	}
	if d.Spec.Replicas != nil && minR != *d.Spec.Replicas {
		t.Errorf("%s: HPA minReplicas %d differs from the Deployment's %d replicas", m.where, minR, *d.Spec.Replicas)
	}
	if minR < 2 {
		t.Errorf("%s: HPA may scale down to %d replica", m.where, minR)
	}
	if hpa.Spec.MaxReplicas < minR {
		t.Errorf("%s: HPA maxReplicas %d < minReplicas %d", m.where, hpa.Spec.MaxReplicas, minR)
	}
	if len(hpa.Spec.Metrics) == 0 {
		t.Errorf("%s: HPA has no metrics", m.where)
	}
}

// checkNetworkPolicy: ingress to the public port from anywhere; to the admin
// port only from selected (monitoring) pods, never from everyone.
func checkNetworkPolicy(t *testing.T, m *manifests, d *appsv1.Deployment, c *corev1.Container, ports relaydPorts) {
	t.Helper()
	var np *networkingv1.NetworkPolicy
	for _, p := range m.netpols {
		if selects(t, &p.Spec.PodSelector, d) {
			if np != nil {
				t.Errorf("%s: more than one NetworkPolicy selects relayd; this test checks one", m.where)
			}
			np = p
		}
	}
	if np == nil {
		t.Errorf("%s: no NetworkPolicy selects the relayd pods", m.where)
		return
	}
	if !slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
		t.Errorf("%s: NetworkPolicy %s does not restrict ingress", m.where, np.Name)
	}
	covers := func(r networkingv1.NetworkPolicyIngressRule, port int32) bool {
		if len(r.Ports) == 0 {
			return true
		}
		for _, p := range r.Ports {
			if p.Port == nil {
				return true
			}
			if got, ok := resolvePort(c, *p.Port); ok && got == port {
				return true
			}
			if p.EndPort != nil && p.Port.Type == intstr.Int && p.Port.IntVal <= port && port <= *p.EndPort {
				return true
			}
		}
		return false
	}
	publicOpen, adminReachable := false, false
	for i, r := range np.Spec.Ingress {
		if covers(r, ports.public) && len(r.From) == 0 {
			publicOpen = true
		}
		if !covers(r, ports.admin) {
			continue
		}
		if len(r.From) == 0 {
			t.Errorf("%s: NetworkPolicy %s rule %d opens the admin port %d to everyone", m.where, np.Name, i, ports.admin)
			continue
		}
		for _, peer := range r.From {
			if peer.IPBlock != nil || peer.PodSelector == nil ||
				(len(peer.PodSelector.MatchLabels) == 0 && len(peer.PodSelector.MatchExpressions) == 0) {
				t.Errorf("%s: NetworkPolicy %s rule %d lets %+v reach the admin port; only labelled pods may", m.where, np.Name, i, peer)
				continue
			}
			adminReachable = true
		}
	}
	if !publicOpen {
		t.Errorf("%s: NetworkPolicy %s does not admit the public port %d from anywhere", m.where, np.Name, ports.public)
	}
	if !adminReachable {
		t.Errorf("%s: NetworkPolicy %s admits no monitoring pods to the admin port %d", m.where, np.Name, ports.admin)
	}
}

// checkValkey: either the overlay runs Valkey itself (a StatefulSet with a
// volume, AOF, noeviction, behind the Service relayd is pointed at), or it
// reaches an external one over TLS with the password from a Secret.
func checkValkey(t *testing.T, m *manifests, ov overlay, c *corev1.Container, cfg config.Config) {
	t.Helper()
	if len(cfg.Valkey.Addrs) == 0 {
		t.Fatalf("%s: no Valkey address", m.where)
	}
	var pw *corev1.EnvVar
	for i, e := range c.Env {
		if e.Name == config.EnvName("valkey-password") {
			pw = &c.Env[i]
		}
	}
	if pw != nil && (pw.ValueFrom == nil || pw.ValueFrom.SecretKeyRef == nil) {
		t.Errorf("%s: RELAYD_VALKEY_PASSWORD is not taken from a Secret", m.where)
	}

	if !ov.inClusterValkey {
		if len(m.statefulSets) != 0 {
			t.Errorf("%s: renders a StatefulSet but is meant for an external Valkey", m.where)
		}
		if !cfg.Valkey.TLS {
			t.Errorf("%s: an external Valkey must be reached over TLS", m.where)
		}
		if pw == nil {
			t.Errorf("%s: no RELAYD_VALKEY_PASSWORD for the external Valkey", m.where)
		}
		return
	}

	checkInClusterValkey(t, m, cfg.Valkey.Addrs[0])
}

// checkInClusterValkey: the Service relayd is pointed at (addr) selects
// the Valkey StatefulSet that governs it, whose data lives on a volume
// claim, with AOF on and noeviction, reached on Valkey's 6379.
func checkInClusterValkey(t *testing.T, m *manifests, addr string) {
	t.Helper()
	host, port, ok := strings.Cut(addr, ":")
	if !ok {
		t.Fatalf("%s: Valkey address %q has no port", m.where, addr)
	}
	var svc *corev1.Service
	for _, s := range m.services {
		if s.Name == host {
			svc = s
		}
	}
	if svc == nil {
		t.Fatalf("%s: RELAYD_VALKEY_ADDR names Service %q, which is not rendered", m.where, host)
	}
	var sts *appsv1.StatefulSet
	for _, s := range m.statefulSets {
		if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(s.Spec.Template.Labels)) {
			sts = s
		}
	}
	if sts == nil {
		t.Fatalf("%s: Service %s selects no StatefulSet", m.where, svc.Name)
	}
	if sts.Spec.ServiceName != svc.Name {
		t.Errorf("%s: StatefulSet %s is governed by %q, want %q", m.where, sts.Name, sts.Spec.ServiceName, svc.Name)
	}
	if len(sts.Spec.VolumeClaimTemplates) == 0 {
		t.Errorf("%s: StatefulSet %s has no volume claim; the AOF would not survive a restart", m.where, sts.Name)
	}
	vc := sts.Spec.Template.Spec.Containers[0]
	args := append(slices.Clone(vc.Command), vc.Args...)
	for flag, want := range map[string]string{"--appendonly": "yes", "--maxmemory-policy": "noeviction"} {
		if got, ok := argValue(args, flag); !ok || got != want {
			t.Errorf("%s: Valkey %s = %q, want %q", m.where, flag, got, want)
		}
	}
	mounted := false
	for _, vm := range vc.VolumeMounts {
		for _, tpl := range sts.Spec.VolumeClaimTemplates {
			if vm.Name == tpl.Name {
				if dir, ok := argValue(args, "--dir"); !ok || path.Clean(dir) == path.Clean(vm.MountPath) {
					mounted = true
				}
			}
		}
	}
	if !mounted {
		t.Errorf("%s: Valkey's data directory is not on its persistent volume", m.where)
	}
	portOK := false
	for _, sp := range svc.Spec.Ports {
		if fmt.Sprint(sp.Port) == port {
			if got, ok := resolvePort(&vc, sp.TargetPort); ok && got == 6379 {
				portOK = true
			}
		}
	}
	if !portOK {
		t.Errorf("%s: Service %s does not carry port %s to Valkey's 6379", m.where, svc.Name, port)
	}
}
