package k8s

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Labels the manifests rely on.
const (
	componentLabel = "app.kubernetes.io/component"
	podNameLabel   = "statefulset.kubernetes.io/pod-name"
)

// workload is a StatefulSet or a Deployment seen through what the checks
// need.
type workload struct {
	kind     string // "StatefulSet" or "Deployment"
	name     string
	replicas int32
	selector *metav1.LabelSelector
	template *corev1.PodTemplateSpec
	sts      *appsv1.StatefulSet // nil for a Deployment
}

func (w workload) String() string { return w.kind + " " + w.name }

// component is the pod template's app.kubernetes.io/component label, which
// also names the image and the binary.
func (w workload) component() string { return w.template.Labels[componentLabel] }

// ordinals returns the StatefulSet's pod ordinals, or a single 0 standing for
// any pod of a Deployment.
func (w workload) ordinals() []int {
	if w.sts == nil {
		return []int{0}
	}
	start := 0
	if o := w.sts.Spec.Ordinals; o != nil {
		start = int(o.Start)
	}
	out := make([]int, w.replicas)
	for i := range out {
		out[i] = start + i
	}
	return out
}

// podName is the name the pod of this ordinal gets.
func (w workload) podName(ordinal int) string {
	if w.sts == nil {
		return w.name + "-5d8f7c9b6-x2x4q"
	}
	return w.name + "-" + strconv.Itoa(ordinal)
}

// podLabels are the labels the pod of this ordinal carries: its template's and,
// for a StatefulSet, the ones the controller adds.
func (w workload) podLabels(ordinal int) labels.Set {
	set := labels.Set{}
	for k, v := range w.template.Labels {
		set[k] = v
	}
	if w.sts != nil {
		set[podNameLabel] = w.podName(ordinal)
		set[appsv1.PodIndexLabel] = strconv.Itoa(ordinal)
	}
	return set
}

func replicasOf(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

func (m *manifests) workloads() []workload {
	var out []workload
	for _, s := range m.statefulSets {
		out = append(out, workload{kind: "StatefulSet", name: s.Name, replicas: replicasOf(s.Spec.Replicas),
			selector: s.Spec.Selector, template: &s.Spec.Template, sts: s})
	}
	for _, d := range m.deployments {
		out = append(out, workload{kind: "Deployment", name: d.Name, replicas: replicasOf(d.Spec.Replicas),
			selector: d.Spec.Selector, template: &d.Spec.Template})
	}
	return out
}

// selecting returns the workloads whose pods sel matches.
func (m *manifests) selecting(sel labels.Selector) []workload {
	var out []workload
	for _, w := range m.workloads() {
		if sel.Matches(labels.Set(w.template.Labels)) {
			out = append(out, w)
		}
	}
	return out
}

// pod is one container of one pod as the binary sees it: its environment and
// arguments after Kubernetes' $(VAR) expansion, and the flags they make.
type pod struct {
	w         workload
	ordinal   int
	name      string
	container *corev1.Container
	env       map[string]string // the container's env, after envFrom and expansion
	args      []string
	flags     map[string]string // flag name -> value: SLUICE_* env (image, then container), then args
	problems  []string
}

func (p *pod) addf(format string, args ...any) {
	p.problems = append(p.problems, fmt.Sprintf("%s pod %s container %s: ", p.w, p.name, p.container.Name)+fmt.Sprintf(format, args...))
}

// boolFlags are the flags that take no value.
var boolFlags = map[string]bool{"bootstrap": true, "pprof": true}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`)

// expand replaces $(VAR) as Kubernetes does; a reference to a variable not
// defined (yet) stays literal in a real pod, which is never what was meant.
func (p *pod) expand(where, s string) string {
	return varRef.ReplaceAllStringFunc(s, func(ref string) string {
		name := ref[2 : len(ref)-1]
		if v, ok := p.env[name]; ok {
			return v
		}
		p.addf("%s: undefined $(%s) (a variable must be defined in env before it is used)", where, name)
		return ref
	})
}

// render builds the pod of this ordinal's container c.
func (m *manifests) render(w workload, ordinal int, c *corev1.Container) *pod {
	p := &pod{w: w, ordinal: ordinal, name: w.podName(ordinal), container: c, env: map[string]string{}, flags: map[string]string{}}
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm := m.configMap(from.ConfigMapRef.Name)
			if cm == nil {
				p.addf("envFrom: ConfigMap %q does not exist", from.ConfigMapRef.Name)
				continue
			}
			for k, v := range cm.Data {
				p.env[from.Prefix+k] = v
			}
		default:
			p.addf("envFrom: only ConfigMaps are used in these manifests")
		}
	}
	for _, e := range c.Env {
		p.env[e.Name] = m.envValue(p, e)
	}
	for i, a := range c.Args {
		p.args = append(p.args, p.expand(fmt.Sprintf("args[%d]", i), a))
	}
	if len(c.Command) > 0 {
		p.addf("command is set: the images' entrypoint is the binary, give flags in args")
	}
	for k, v := range m.imageEnv[imageName(c.Image)] {
		p.setEnvFlag(k, v)
	}
	for k, v := range p.env {
		p.setEnvFlag(k, v)
	}
	p.parseArgs()
	return p
}

func imageName(image string) string {
	name, _, _ := strings.Cut(image, ":")
	return name
}

func (p *pod) setEnvFlag(k, v string) {
	if name, ok := strings.CutPrefix(k, "SLUICE_"); ok {
		p.flags[strings.ReplaceAll(strings.ToLower(name), "_", "-")] = v
	}
}

func (p *pod) parseArgs() {
	for i := 0; i < len(p.args); i++ {
		a := p.args[i]
		if !strings.HasPrefix(a, "-") {
			p.addf("args: %q is not a flag", a)
			continue
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		switch {
		case hasValue:
		case boolFlags[name]:
			value = "true"
		case i+1 < len(p.args):
			i++
			value = p.args[i]
		default:
			p.addf("args: flag -%s has no value", name)
		}
		p.flags[name] = value
	}
}

// envValue resolves one env entry of pod p as the kubelet would.
func (m *manifests) envValue(p *pod, e corev1.EnvVar) string {
	where := "env " + e.Name
	if e.ValueFrom == nil {
		return p.expand(where, e.Value)
	}
	switch vf := e.ValueFrom; {
	case vf.FieldRef != nil:
		return p.fieldRef(where, vf.FieldRef.FieldPath)
	case vf.ConfigMapKeyRef != nil:
		ref := vf.ConfigMapKeyRef
		cm := m.configMap(ref.Name)
		if cm == nil {
			p.addf("%s: ConfigMap %q does not exist", where, ref.Name)
			return ""
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			p.addf("%s: ConfigMap %q has no key %q (it has %s)", where, ref.Name, ref.Key, strings.Join(keys(cm.Data), ", "))
		}
		return v
	case vf.ResourceFieldRef != nil:
		return "1"
	}
	p.addf("%s: only fieldRef, configMapKeyRef and resourceFieldRef are used in these manifests", where)
	return ""
}

var labelPath = regexp.MustCompile(`^metadata\.labels\['([^']+)'\]$`)

func (p *pod) fieldRef(where, path string) string {
	switch path {
	case "metadata.name":
		return p.name
	case "metadata.namespace":
		return "some-namespace"
	case "status.podIP":
		return "192.0.2.10"
	}
	if sub := labelPath.FindStringSubmatch(path); sub != nil {
		v, ok := p.w.podLabels(p.ordinal)[sub[1]]
		if !ok {
			p.addf("%s: fieldRef %s: the pod has no label %q", where, path, sub[1])
		}
		return v
	}
	p.addf("%s: fieldRef %s is not one these checks know", where, path)
	return ""
}

func (m *manifests) configMap(name string) *corev1.ConfigMap {
	for _, c := range m.configMaps {
		if c.Name == name {
			return c
		}
	}
	return nil
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
