package k8s

import (
	"fmt"
	"net"
	"net/url"
	"path"
	"strconv"
	"strings"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// dataDir is where every StatefulSet mounts its volume and keeps its state.
const dataDir = "/data"

// binary is what one service's binary needs from its pods; the component label
// of a pod template names it.
type binary struct {
	// listen maps each listen-address flag to the container port, by name, it
	// must bind (on every interface: the default 127.0.0.1 is unreachable).
	listen map[string]string
	// required are flags without a default that works in a cluster.
	required []string
	// urls maps each comma-separated URL-list flag to the component its
	// addresses must reach, on that component's "http" port.
	urls map[string]string
	// raft: -id and -peers name the StatefulSet's pods.
	raft bool
	// nodeID: -node-id is a positive integer, unique in the StatefulSet.
	nodeID bool
	// self maps flags holding the pod's own address to the port, by name,
	// they must name.
	self map[string]string
}

var binaries = map[string]binary{
	"metadata": {
		listen:   map[string]string{"http-addr": "http", "raft-addr": "raft", "admin-addr": "admin"},
		required: []string{"id", "peers", "data-dir"},
		raft:     true,
	},
	"offsets": {
		listen:   map[string]string{"http-addr": "http", "raft-addr": "raft", "admin-addr": "admin"},
		required: []string{"id", "peers", "data-dir", "metadata"},
		urls:     map[string]string{"metadata": "metadata"},
		raft:     true,
	},
	"storage": {
		listen:   map[string]string{"addr": "storage", "admin-addr": "admin", "kafka-addr": "kafka"},
		required: []string{"node-id", "data-dir", "metadata", "internal-addr", "advertised-addr", "kafka-advertised-addr"},
		urls:     map[string]string{"metadata": "metadata"},
		nodeID:   true,
		// The base manifests serve clients inside the cluster only; an
		// overlay that advertises an external address is not checked here.
		self: map[string]string{"internal-addr": "storage", "advertised-addr": "storage", "kafka-advertised-addr": "kafka"},
	},
	"frontend": {
		listen: map[string]string{"http-addr": "http", "admin-addr": "admin", "kafka-addr": "kafka"},
		// The advertised Kafka address is the pod's IP, which only the
		// kubelet knows: it must be set, not resolved here.
		required: []string{"metadata", "offsets", "kafka-advertised-addr"},
		urls:     map[string]string{"metadata": "metadata", "offsets": "offsets"},
	},
}

type problems []string

func (p *problems) addf(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// check returns every inconsistency found; none means the manifests hang
// together.
func (m *manifests) check() []string {
	var p problems
	m.checkObjects(&p)
	for _, w := range m.workloads() {
		m.checkWorkload(&p, w)
	}
	m.checkServices(&p)
	m.checkPDBs(&p)
	m.checkHPAs(&p)
	m.checkKustomization(&p)
	return p
}

// checkObjects: names are unique per kind and no namespace is written.
func (m *manifests) checkObjects(p *problems) {
	var metas []struct {
		kind string
		meta *metav1.ObjectMeta
	}
	add := func(kind string, meta *metav1.ObjectMeta) {
		metas = append(metas, struct {
			kind string
			meta *metav1.ObjectMeta
		}{kind, meta})
	}
	for _, o := range m.statefulSets {
		add("StatefulSet", &o.ObjectMeta)
	}
	for _, o := range m.deployments {
		add("Deployment", &o.ObjectMeta)
	}
	for _, o := range m.services {
		add("Service", &o.ObjectMeta)
	}
	for _, o := range m.configMaps {
		add("ConfigMap", &o.ObjectMeta)
	}
	for _, o := range m.pdbs {
		add("PodDisruptionBudget", &o.ObjectMeta)
	}
	for _, o := range m.hpas {
		add("HorizontalPodAutoscaler", &o.ObjectMeta)
	}
	seen := map[string]bool{}
	for _, o := range metas {
		id := o.kind + " " + o.meta.Name
		switch {
		case o.meta.Name == "":
			p.addf("a %s has no name", o.kind)
		case seen[id]:
			p.addf("%s is defined twice", id)
		}
		seen[id] = true
		if o.meta.Namespace != "" {
			p.addf("%s: namespace %q is hard-coded; the manifests are namespace-agnostic", id, o.meta.Namespace)
		}
	}
}

func (m *manifests) checkWorkload(p *problems, w workload) {
	sel, err := metav1.LabelSelectorAsSelector(w.selector)
	switch {
	case err != nil || w.selector == nil:
		p.addf("%s: selector: %v", w, err)
	case sel.Empty() || !sel.Matches(labels.Set(w.template.Labels)):
		p.addf("%s: selector %s does not match its pod template labels %v", w, sel, w.template.Labels)
	}
	bin, ok := binaries[w.component()]
	if !ok {
		p.addf("%s: pod label %s=%q names no Sluice service", w, componentLabel, w.component())
		return
	}
	spec := &w.template.Spec
	if spec.EnableServiceLinks == nil || *spec.EnableServiceLinks {
		p.addf("%s: enableServiceLinks must be false (service link variables can shadow SLUICE_* flags)", w)
	}
	if sc := spec.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
		p.addf("%s: pod securityContext.runAsNonRoot must be true", w)
	}
	if len(spec.Containers) == 0 {
		p.addf("%s: no container", w)
	}
	for i := range spec.Containers {
		c := &spec.Containers[i]
		checkContainer(p, w, c)
		var pods []*pod
		for _, ord := range w.ordinals() {
			pd := m.render(w, ord, c)
			m.checkFlags(pd, bin)
			*p = append(*p, pd.problems...)
			pods = append(pods, pd)
		}
		checkUnique(p, w, pods, bin)
	}
	if w.sts != nil {
		m.checkStatefulSet(p, w)
	}
}

// checkContainer checks what does not depend on the pod's identity.
func checkContainer(p *problems, w workload, c *corev1.Container) {
	id := fmt.Sprintf("%s container %s", w, c.Name)
	if want := "sluice/" + w.component() + ":dev"; c.Image != want {
		p.addf("%s: image %q, want %q", id, c.Image, want)
	}
	if c.ImagePullPolicy != corev1.PullIfNotPresent {
		p.addf("%s: imagePullPolicy %q, want IfNotPresent", id, c.ImagePullPolicy)
	}
	names := map[string]bool{}
	for _, cp := range c.Ports {
		if cp.Name == "" || names[cp.Name] {
			p.addf("%s: container port %d needs a unique name", id, cp.ContainerPort)
		}
		names[cp.Name] = true
	}
	probes := []struct {
		kind, path string
		probe      *corev1.Probe
		optional   bool
	}{
		{"readinessProbe", "/readyz", c.ReadinessProbe, false},
		{"livenessProbe", "/healthz", c.LivenessProbe, false},
		{"startupProbe", "/healthz", c.StartupProbe, true},
	}
	for _, pr := range probes {
		switch {
		case pr.probe == nil && pr.optional:
		case pr.probe == nil:
			p.addf("%s: no %s", id, pr.kind)
		case pr.probe.HTTPGet == nil:
			p.addf("%s: %s must be an httpGet of %s", id, pr.kind, pr.path)
		default:
			if pr.probe.HTTPGet.Path != pr.path {
				p.addf("%s: %s path %q, want %s", id, pr.kind, pr.probe.HTTPGet.Path, pr.path)
			}
			if cp, ok := containerPort(c, pr.probe.HTTPGet.Port); !ok || cp.Name != "admin" {
				p.addf("%s: %s port %s is not the container port named admin", id, pr.kind, pr.probe.HTTPGet.Port.String())
			}
		}
	}
	req, lim := c.Resources.Requests, c.Resources.Limits
	if req.Cpu().IsZero() || req.Memory().IsZero() {
		p.addf("%s: resources need a cpu request and a memory request", id)
	}
	if lim.Memory().IsZero() {
		p.addf("%s: resources need a memory limit", id)
	} else if lim.Memory().Cmp(*req.Memory()) < 0 {
		p.addf("%s: memory limit below its request", id)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p.addf("%s: securityContext.readOnlyRootFilesystem must be true", id)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		p.addf("%s: securityContext.allowPrivilegeEscalation must be false", id)
	}
}

// containerPort finds a port of c by name or number.
func containerPort(c *corev1.Container, port intstr.IntOrString) (corev1.ContainerPort, bool) {
	for _, cp := range c.Ports {
		if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// workloadPort finds a container port of any container of w.
func workloadPort(w workload, port intstr.IntOrString) (corev1.ContainerPort, bool) {
	for i := range w.template.Spec.Containers {
		if cp, ok := containerPort(&w.template.Spec.Containers[i], port); ok {
			return cp, true
		}
	}
	return corev1.ContainerPort{}, false
}

// checkFlags checks the flags one pod's binary ends up with.
func (m *manifests) checkFlags(pd *pod, bin binary) {
	for _, f := range bin.required {
		if pd.flags[f] == "" {
			pd.addf("flag -%s is not set (neither in args nor as SLUICE_%s)", f, strings.ToUpper(strings.ReplaceAll(f, "-", "_")))
		}
	}
	for f, portName := range bin.listen {
		v, ok := pd.flags[f]
		if !ok {
			pd.addf("flag -%s is not set: the binary would listen on 127.0.0.1 only", f)
			continue
		}
		host, port, err := net.SplitHostPort(v)
		if err != nil {
			pd.addf("flag -%s: %v", f, err)
			continue
		}
		if host != "" && !net.ParseIP(host).IsUnspecified() {
			pd.addf("flag -%s: %q listens on %s only; probes and other pods need 0.0.0.0", f, v, host)
		}
		want, ok := containerPort(pd.container, intstr.FromString(portName))
		if !ok {
			pd.addf("flag -%s: no container port named %s", f, portName)
		} else if port != strconv.Itoa(int(want.ContainerPort)) {
			pd.addf("flag -%s: port %s is not the declared container port %s (%d)", f, port, portName, want.ContainerPort)
		}
	}
	for f, component := range bin.urls {
		for _, u := range splitList(pd.flags[f]) {
			if err := m.checkURL(u, component); err != nil {
				pd.addf("flag -%s: %v", f, err)
			}
		}
	}
	if bin.raft {
		m.checkPeers(pd)
	}
	if bin.nodeID {
		if id, err := strconv.Atoi(pd.flags["node-id"]); err != nil || id < 1 || id > 1<<30 {
			pd.addf("flag -node-id: %q is not a positive integer (services/storage rejects it)", pd.flags["node-id"])
		}
	}
	for f, portName := range bin.self {
		if pd.flags[f] == "" {
			continue
		}
		w, podName, cp, err := m.resolveAddr(pd.flags[f])
		switch {
		case err != nil:
			pd.addf("flag -%s: %v", f, err)
		case w.name != pd.w.name || podName != pd.name || cp.Name != portName:
			pd.addf("flag -%s: %q is not this pod's %s port (it reaches %s pod %q port %s)", f, pd.flags[f], portName, w, podName, cp.Name)
		}
	}
}

func splitList(s string) []string {
	var out []string
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

// checkURL checks that u reaches the http port of the given component.
func (m *manifests) checkURL(u, component string) error {
	parsed, err := url.Parse(u)
	if err != nil || parsed.Scheme != "http" || parsed.Host == "" {
		return fmt.Errorf("%q is not an http://host:port URL", u)
	}
	w, _, cp, err := m.resolveAddr(parsed.Host)
	if err != nil {
		return fmt.Errorf("%q: %w", u, err)
	}
	if w.component() != component || cp.Name != "http" {
		return fmt.Errorf("%q reaches %s port %s, want the http port of %s", u, w, cp.Name, component)
	}
	return nil
}

// resolveAddr follows an in-cluster host:port to the workload and container
// port it reaches: "<service>:<port>" through a Service's port mapping, or
// "<pod>.<headless service>:<port>" to one pod of the StatefulSet governed by
// that Service (podName is then that pod).
func (m *manifests) resolveAddr(hostport string) (w workload, podName string, cp corev1.ContainerPort, err error) {
	host, portStr, err := net.SplitHostPort(hostport)
	if err != nil {
		return w, "", cp, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return w, "", cp, fmt.Errorf("%q: port %q", hostport, portStr)
	}
	parts := strings.Split(host, ".")
	switch len(parts) {
	case 1:
		svc := m.service(host)
		if svc == nil {
			return w, "", cp, fmt.Errorf("%q: no Service named %q", hostport, host)
		}
		if svc.Spec.ClusterIP == corev1.ClusterIPNone {
			return w, "", cp, fmt.Errorf("%q: %s is headless; name a pod (<pod>.%s) or a client Service", hostport, host, host)
		}
		var sp *corev1.ServicePort
		for i := range svc.Spec.Ports {
			if svc.Spec.Ports[i].Port == int32(port) {
				sp = &svc.Spec.Ports[i]
			}
		}
		if sp == nil {
			return w, "", cp, fmt.Errorf("%q: Service %s has no port %d", hostport, host, port)
		}
		ws := m.selecting(labels.SelectorFromSet(svc.Spec.Selector))
		if len(ws) != 1 {
			return w, "", cp, fmt.Errorf("%q: Service %s selects %d workloads", hostport, host, len(ws))
		}
		cp, ok := workloadPort(ws[0], targetPort(*sp))
		if !ok {
			return w, "", cp, fmt.Errorf("%q: Service %s port %d targets no container port of %s", hostport, host, port, ws[0])
		}
		return ws[0], "", cp, nil
	case 2:
		for _, cand := range m.workloads() {
			if cand.sts == nil || cand.sts.Spec.ServiceName != parts[1] {
				continue
			}
			for _, ord := range cand.ordinals() {
				if cand.podName(ord) != parts[0] {
					continue
				}
				cp, ok := workloadPort(cand, intstr.FromInt32(int32(port)))
				if !ok {
					return w, "", cp, fmt.Errorf("%q: %s declares no container port %d", hostport, cand, port)
				}
				return cand, parts[0], cp, nil
			}
			return w, "", cp, fmt.Errorf("%q: %s has no pod %q (pods %s)", hostport, cand, parts[0], strings.Join(podNames(cand), ", "))
		}
		return w, "", cp, fmt.Errorf("%q: no StatefulSet has serviceName %q", hostport, parts[1])
	}
	return w, "", cp, fmt.Errorf("%q: use a Service name or <pod>.<headless service>, which resolve in any namespace", hostport)
}

func podNames(w workload) []string {
	var out []string
	for _, ord := range w.ordinals() {
		out = append(out, w.podName(ord))
	}
	return out
}

// targetPort is the Service port's target, defaulting to its own number.
func targetPort(sp corev1.ServicePort) intstr.IntOrString {
	if sp.TargetPort.Type == intstr.Int && sp.TargetPort.IntVal == 0 {
		return intstr.FromInt32(sp.Port)
	}
	return sp.TargetPort
}

// checkPeers checks that -peers lists exactly the StatefulSet's pods, each by
// its name as id, at its stable DNS name on the raft and http ports the
// container declares, and that -id is this pod's own entry.
func (m *manifests) checkPeers(pd *pod) {
	if pd.w.sts == nil {
		pd.addf("a raft group must be a StatefulSet (stable names and volumes)")
		return
	}
	want := map[string]bool{}
	for _, n := range podNames(pd.w) {
		want[n] = true
	}
	items := splitList(pd.flags["peers"])
	if len(items) != int(pd.w.replicas) {
		pd.addf("flag -peers lists %d members, the StatefulSet has %d replicas", len(items), pd.w.replicas)
	}
	self := false
	for _, item := range items {
		parts := strings.Split(item, "=")
		if len(parts) != 3 {
			pd.addf("flag -peers: %q is not id=raftaddr=httpaddr", item)
			continue
		}
		id := parts[0]
		if !want[id] {
			pd.addf("flag -peers: id %q is not a pod of the StatefulSet (pods %s), or is listed twice", id, strings.Join(podNames(pd.w), ", "))
		}
		delete(want, id)
		for _, a := range []struct{ addr, port string }{{parts[1], "raft"}, {parts[2], "http"}} {
			w, podName, cp, err := m.resolveAddr(a.addr)
			switch {
			case err != nil:
				pd.addf("flag -peers: member %s: %v", id, err)
			case w.name != pd.w.name || podName != id || cp.Name != a.port:
				pd.addf("flag -peers: member %s: %q reaches %s pod %q port %s, want pod %s port %s", id, a.addr, w, podName, cp.Name, id, a.port)
			}
		}
		self = self || id == pd.flags["id"]
	}
	if !self {
		pd.addf("flag -id %q: not listed in -peers", pd.flags["id"])
	}
	if pd.flags["id"] != pd.name {
		pd.addf("flag -id %q: want the pod name %q, which -peers names at its DNS name", pd.flags["id"], pd.name)
	}
}

// checkUnique checks that the pods of a StatefulSet have distinct identities.
func checkUnique(p *problems, w workload, pods []*pod, bin binary) {
	for _, f := range []string{"id", "node-id"} {
		if (f == "id" && !bin.raft) || (f == "node-id" && !bin.nodeID) {
			continue
		}
		seen := map[string]string{}
		for _, pd := range pods {
			v := pd.flags[f]
			if other, ok := seen[v]; ok {
				p.addf("%s: pods %s and %s both get -%s %q", w, other, pd.name, f, v)
			}
			seen[v] = pd.name
		}
	}
}

// checkStatefulSet: the governing headless Service, the volumes and the data
// directory.
func (m *manifests) checkStatefulSet(p *problems, w workload) {
	s := w.sts
	svc := m.service(s.Spec.ServiceName)
	switch {
	case svc == nil:
		p.addf("%s: serviceName %q names no Service", w, s.Spec.ServiceName)
	case svc.Spec.ClusterIP != corev1.ClusterIPNone:
		p.addf("%s: serviceName %q is not headless (clusterIP None)", w, s.Spec.ServiceName)
	case len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)):
		p.addf("%s: headless Service %s selector %v does not match the pod labels", w, svc.Name, svc.Spec.Selector)
	case !svc.Spec.PublishNotReadyAddresses:
		p.addf("%s: headless Service %s must publishNotReadyAddresses: members resolve each other (and raft itself) before they are ready", w, svc.Name)
	}
	claims := map[string]bool{}
	for _, t := range s.Spec.VolumeClaimTemplates {
		claims[t.Name] = true
		if len(t.Spec.AccessModes) != 1 || t.Spec.AccessModes[0] != corev1.ReadWriteOnce {
			p.addf("%s: volume claim %s: accessModes must be [ReadWriteOnce]", w, t.Name)
		}
		if q := t.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
			p.addf("%s: volume claim %s: no storage request", w, t.Name)
		}
	}
	for _, c := range w.template.Spec.Containers {
		mounted := false
		for _, vm := range c.VolumeMounts {
			if claims[vm.Name] && path.Clean(vm.MountPath) == dataDir && vm.SubPath == "" && !vm.ReadOnly {
				mounted = true
			}
		}
		if !mounted {
			p.addf("%s container %s: no volume claim template mounted at %s", w, c.Name, dataDir)
		}
		for _, ord := range w.ordinals() {
			if pd := m.render(w, ord, &c); path.Clean(pd.flags["data-dir"]) != dataDir {
				p.addf("%s pod %s: -data-dir %q, want %s (the volume)", w, pd.name, pd.flags["data-dir"], dataDir)
				break
			}
		}
	}
}

func (m *manifests) service(name string) *corev1.Service {
	for _, s := range m.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// checkServices: each Service selects exactly one workload and targets ports
// its containers declare.
func (m *manifests) checkServices(p *problems) {
	for _, svc := range m.services {
		id := "Service " + svc.Name
		if len(svc.Spec.Selector) == 0 {
			p.addf("%s: no selector", id)
			continue
		}
		ws := m.selecting(labels.SelectorFromSet(svc.Spec.Selector))
		if len(ws) != 1 {
			p.addf("%s: selector %v selects %d workloads, want 1", id, svc.Spec.Selector, len(ws))
			continue
		}
		names := map[string]bool{}
		for _, sp := range svc.Spec.Ports {
			if sp.Name == "" || names[sp.Name] {
				p.addf("%s: port %d needs a unique name", id, sp.Port)
			}
			names[sp.Name] = true
			tp := targetPort(sp)
			if _, found := workloadPort(ws[0], tp); !found {
				p.addf("%s: port %s targetPort %s is not a container port of %s", id, sp.Name, tp.String(), ws[0])
			}
		}
	}
}

// checkPDBs: each budget selects one workload, each workload has one, and
// no budget blocks every drain or breaks a raft quorum.
func (m *manifests) checkPDBs(p *problems) {
	covered := map[string]int{}
	for _, pdb := range m.pdbs {
		id := "PodDisruptionBudget " + pdb.Name
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || pdb.Spec.Selector == nil || sel.Empty() {
			p.addf("%s: needs a selector (%v)", id, err)
			continue
		}
		ws := m.selecting(sel)
		if len(ws) != 1 {
			p.addf("%s: selector %s selects %d workloads, want 1", id, sel, len(ws))
			continue
		}
		w := ws[0]
		covered[w.String()]++
		replicas := int(m.minReplicas(w))
		var allowed int
		switch {
		case pdb.Spec.MaxUnavailable != nil && pdb.Spec.MinAvailable == nil:
			allowed, err = intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MaxUnavailable, replicas, true)
		case pdb.Spec.MinAvailable != nil && pdb.Spec.MaxUnavailable == nil:
			var minAvail int
			minAvail, err = intstr.GetScaledValueFromIntOrPercent(pdb.Spec.MinAvailable, replicas, true)
			allowed = replicas - minAvail
		default:
			err = fmt.Errorf("set exactly one of minAvailable and maxUnavailable")
		}
		switch {
		case err != nil:
			p.addf("%s: %v", id, err)
		case allowed < 1:
			p.addf("%s: allows no disruption of %s at %d replicas: node drains would block", id, w, replicas)
		case allowed >= replicas:
			p.addf("%s: allows all %d pods of %s to be down at once", id, replicas, w)
		case binaries[w.component()].raft && allowed > (replicas-1)/2:
			p.addf("%s: allows %d of %d raft members down, which loses the quorum", id, allowed, replicas)
		}
	}
	for _, w := range m.workloads() {
		if covered[w.String()] != 1 {
			p.addf("%s: covered by %d PodDisruptionBudgets, want 1", w, covered[w.String()])
		}
	}
}

// minReplicas is a workload's smallest replica count: its autoscaler's
// minimum when it has one.
func (m *manifests) minReplicas(w workload) int32 {
	for _, h := range m.hpas {
		if h.Spec.ScaleTargetRef.Kind == w.kind && h.Spec.ScaleTargetRef.Name == w.name && h.Spec.MinReplicas != nil {
			return *h.Spec.MinReplicas
		}
	}
	return w.replicas
}

// checkHPAs: each autoscaler targets an existing workload that is not a raft
// group, within sane bounds, on resources its containers request.
func (m *manifests) checkHPAs(p *problems) {
	targeted := map[string]bool{}
	for _, h := range m.hpas {
		id := "HorizontalPodAutoscaler " + h.Name
		ref := h.Spec.ScaleTargetRef
		var target *workload
		for _, w := range m.workloads() {
			if w.kind == ref.Kind && w.name == ref.Name && ref.APIVersion == "apps/v1" {
				target = &w
			}
		}
		if target == nil {
			p.addf("%s: scaleTargetRef %s %s %s names no workload", id, ref.APIVersion, ref.Kind, ref.Name)
			continue
		}
		if targeted[target.String()] {
			p.addf("%s: %s already has an autoscaler", id, target)
		}
		targeted[target.String()] = true
		if binaries[target.component()].raft || target.sts != nil {
			p.addf("%s: %s has a fixed membership and cannot be autoscaled", id, target)
		}
		minR := int32(1)
		if h.Spec.MinReplicas != nil {
			minR = *h.Spec.MinReplicas
		}
		if minR < 1 || minR > h.Spec.MaxReplicas {
			p.addf("%s: minReplicas %d and maxReplicas %d", id, minR, h.Spec.MaxReplicas)
		}
		if target.replicas < minR || target.replicas > h.Spec.MaxReplicas {
			p.addf("%s: %s starts at %d replicas, outside %d..%d", id, target, target.replicas, minR, h.Spec.MaxReplicas)
		}
		if len(h.Spec.Metrics) == 0 {
			p.addf("%s: no metric", id)
		}
		for _, mt := range h.Spec.Metrics {
			if mt.Type != autoscalingv2.ResourceMetricSourceType || mt.Resource == nil {
				continue
			}
			if mt.Resource.Target.Type != autoscalingv2.UtilizationMetricType {
				continue
			}
			for _, c := range target.template.Spec.Containers {
				if q, ok := c.Resources.Requests[mt.Resource.Name]; !ok || q.IsZero() {
					p.addf("%s: %s utilization needs a %s request on container %s of %s", id, mt.Resource.Name, mt.Resource.Name, c.Name, target)
				}
			}
		}
	}
}

// checkKustomization: the kustomization lists every manifest, once, and
// nothing else.
func (m *manifests) checkKustomization(p *problems) {
	k := m.kustomization
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		p.addf("kustomization: apiVersion %q kind %q", k.APIVersion, k.Kind)
	}
	if k.Namespace != "" {
		p.addf("kustomization: namespace %q is hard-coded; the manifests are namespace-agnostic", k.Namespace)
	}
	files := map[string]bool{}
	for _, f := range m.files {
		files[f] = true
	}
	listed := map[string]bool{}
	for _, r := range k.Resources {
		switch {
		case listed[r]:
			p.addf("kustomization: %s listed twice", r)
		case !files[r]:
			p.addf("kustomization: resource %s is not a manifest in deploy/k8s", r)
		}
		listed[r] = true
	}
	for _, f := range m.files {
		if !listed[f] {
			p.addf("kustomization: %s is not listed in resources", f)
		}
	}
}
