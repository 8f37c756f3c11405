package k8s

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func load(t *testing.T) *manifests {
	t.Helper()
	m, err := loadManifests(manifestDir, dockerfileDir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestManifests decodes deploy/k8s and reports every inconsistency.
func TestManifests(t *testing.T) {
	m := load(t)
	for _, p := range m.check() {
		t.Error(p)
	}
	// The shape the brief of deploy/k8s fixes, so that an emptied directory
	// cannot pass.
	want := map[string]int{"StatefulSet": 3, "Deployment": 1, "HorizontalPodAutoscaler": 1, "PodDisruptionBudget": 4, "ConfigMap": 1}
	got := map[string]int{"StatefulSet": len(m.statefulSets), "Deployment": len(m.deployments),
		"HorizontalPodAutoscaler": len(m.hpas), "PodDisruptionBudget": len(m.pdbs), "ConfigMap": len(m.configMaps)}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%d %s objects, want %d", got[k], k, n)
		}
	}
	for _, w := range m.workloads() {
		if w.sts != nil && w.replicas != 3 {
			t.Errorf("%s: %d replicas, want 3", w, w.replicas)
		}
	}
}

// TestDecodingIsStrict: a misspelt or unknown field, a duplicated key or a
// kind the checks do not know fails the load instead of being dropped.
func TestDecodingIsStrict(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(manifestDir, "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	if err := (&manifests{}).decodeFile("metadata.yaml", data); err != nil {
		t.Fatalf("unchanged file: %v", err)
	}
	cases := map[string]string{
		"misspelt nested field": strings.Replace(text, "containerPort: 7071", "contanerPort: 7071", 1),
		"unknown top field":     strings.Replace(text, "  replicas: 3\n", "  replicas: 3\n  replicaCount: 3\n", 1),
		"duplicate key":         strings.Replace(text, "  replicas: 3\n", "  replicas: 3\n  replicas: 5\n", 1),
		"unknown kind":          text + "\n---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: x\n",
		"wrong apiVersion":      strings.Replace(text, "apiVersion: policy/v1\n", "apiVersion: policy/v1beta1\n", 1),
		"wrong value type":      strings.Replace(text, "  replicas: 3\n", "  replicas: three\n", 1),
	}
	for name, broken := range cases {
		if broken == text {
			t.Fatalf("%s: the edit did not apply", name)
		}
		if err := (&manifests{}).decodeFile("metadata.yaml", []byte(broken)); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "# header\n---\na: 1\n---   \n# only a comment\n--- # trailing\nb: 2\n"
	docs := splitDocuments([]byte(in))
	if len(docs) != 2 || !strings.Contains(string(docs[0]), "a: 1") || !strings.Contains(string(docs[1]), "b: 2") {
		t.Fatalf("split into %q", docs)
	}
}

// TestImageEnvFallback: a listen address left to the image's ENV still
// counts, and one set nowhere does not.
func TestImageEnvFallback(t *testing.T) {
	m := load(t)
	c := container(m, "offsets")
	c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "SLUICE_RAFT_ADDR" })
	if p := m.check(); len(p) != 0 {
		t.Fatalf("with the image's SLUICE_RAFT_ADDR: %q", p)
	}
	delete(m.imageEnv["sluice/offsets"], "SLUICE_RAFT_ADDR")
	if !anyContains(m.check(), "flag -raft-addr is not set") {
		t.Fatal("a listen address set nowhere passed")
	}
}

// TestEveryCheckCanFail breaks the parsed manifests one way at a time and
// expects the problem to be reported.
func TestEveryCheckCanFail(t *testing.T) {
	if p := load(t).check(); len(p) != 0 {
		t.Fatalf("the manifests must pass before they are broken: %q", p)
	}
	for _, tc := range mutations {
		t.Run(tc.name, func(t *testing.T) {
			m := load(t)
			tc.mutate(m)
			got := m.check()
			if !anyContains(got, tc.want) {
				t.Errorf("want a problem containing %q, got %q", tc.want, got)
			}
		})
	}
}

func anyContains(list []string, sub string) bool {
	return slices.ContainsFunc(list, func(s string) bool { return strings.Contains(s, sub) })
}

var mutations = []struct {
	name   string
	mutate func(*manifests)
	want   string
}{
	// StatefulSets and their headless Services.
	{"serviceName names no Service", func(m *manifests) { sts(m, "metadata").Spec.ServiceName = "metadata-hl" },
		`serviceName "metadata-hl" names no Service`},
	{"governing Service not headless", func(m *manifests) { svc(m, "metadata-headless").Spec.ClusterIP = "" },
		"is not headless"},
	{"headless Service selects other pods", func(m *manifests) { svc(m, "storage-headless").Spec.Selector[componentLabel] = "offsets" },
		"does not match the pod labels"},
	{"headless Service hides unready pods", func(m *manifests) { svc(m, "offsets-headless").Spec.PublishNotReadyAddresses = false },
		"publishNotReadyAddresses"},
	{"workload selector misses its pods", func(m *manifests) { m.deployments[0].Spec.Selector.MatchLabels[componentLabel] = "front" },
		"does not match its pod template labels"},
	{"unknown component", func(m *manifests) { sts(m, "storage").Spec.Template.Labels[componentLabel] = "broker" },
		"names no Sluice service"},
	{"duplicate object", func(m *manifests) { m.services = append(m.services, svc(m, "frontend").DeepCopy()) },
		"Service frontend is defined twice"},
	{"namespace hard-coded", func(m *manifests) { m.configMaps[0].Namespace = "sluice" },
		`namespace "sluice" is hard-coded`},

	// Services.
	{"Service targets an undeclared port", func(m *manifests) { svc(m, "frontend").Spec.Ports[0].TargetPort = intstr.FromString("web") },
		"targetPort web is not a container port"},
	{"Service targets a port by a wrong number", func(m *manifests) { svc(m, "metadata").Spec.Ports[0].TargetPort = intstr.FromInt32(7170) },
		"targetPort 7170 is not a container port"},
	{"Service selects nothing", func(m *manifests) { svc(m, "offsets").Spec.Selector[componentLabel] = "offset" },
		"selects 0 workloads"},
	{"Service port names repeat", func(m *manifests) { svc(m, "metadata-headless").Spec.Ports[1].Name = "http" },
		"port 7071 needs a unique name"},

	// Probes.
	{"readiness probe on the http port", func(m *manifests) { container(m, "metadata").ReadinessProbe.HTTPGet.Port = intstr.FromString("http") },
		"readinessProbe port http is not the container port named admin"},
	{"liveness probe by number on the http port", func(m *manifests) { container(m, "frontend").LivenessProbe.HTTPGet.Port = intstr.FromInt32(8080) },
		"livenessProbe port 8080 is not the container port named admin"},
	{"readiness probe path", func(m *manifests) { container(m, "offsets").ReadinessProbe.HTTPGet.Path = "/metrics" },
		`readinessProbe path "/metrics"`},
	{"liveness probe missing", func(m *manifests) { container(m, "storage").LivenessProbe = nil },
		"no livenessProbe"},
	{"startup probe not http", func(m *manifests) { container(m, "storage").StartupProbe.HTTPGet = nil },
		"startupProbe must be an httpGet"},

	// Listen addresses and declared ports.
	{"admin port differs from the listen address", func(m *manifests) { port(container(m, "metadata"), "admin").ContainerPort = 7079 },
		"flag -admin-addr: port 7072 is not the declared container port admin (7079)"},
	{"listening on loopback", func(m *manifests) { env(container(m, "frontend"), "SLUICE_HTTP_ADDR").Value = "127.0.0.1:8080" },
		"listens on 127.0.0.1 only"},
	{"unnamed container port", func(m *manifests) { container(m, "storage").Ports[0].Name = "" },
		"container port 9101 needs a unique name"},

	// -id and -peers.
	{"replicas without matching peers", func(m *manifests) { five := int32(5); sts(m, "metadata").Spec.Replicas = &five },
		"flag -peers lists 3 members, the StatefulSet has 5 replicas"},
	{"peer at the admin port", func(m *manifests) {
		replaceArg(container(m, "metadata"), "metadata-1.metadata-headless:7071", "metadata-1.metadata-headless:7072")
	}, "want pod metadata-1 port raft"},
	{"peer http address on the raft port", func(m *manifests) {
		replaceArg(container(m, "offsets"), "offsets-2.offsets-headless:7080", "offsets-2.offsets-headless:7081")
	}, "want pod offsets-2 port http"},
	{"peer under another Service", func(m *manifests) {
		replaceArg(container(m, "metadata"), "metadata-2.metadata-headless", "metadata-2.offsets-headless")
	}, `has no pod "metadata-2"`},
	{"peer by a fully qualified name", func(m *manifests) {
		replaceArg(container(m, "metadata"), "metadata-0.metadata-headless:7071", "metadata-0.metadata-headless.sluice.svc:7071")
	}, "use a Service name or <pod>.<headless service>"},
	{"peer id that is not a pod", func(m *manifests) { replaceArg(container(m, "offsets"), "offsets-0=", "offsets-9=") },
		`id "offsets-9" is not a pod`},
	{"same -id in every pod", func(m *manifests) { replaceArg(container(m, "metadata"), "$(POD_NAME)", "metadata-0") },
		"both get -id"},
	{"-id not in -peers", func(m *manifests) { replaceArg(container(m, "offsets"), "$(POD_NAME)", "$(POD_NAME)-x") },
		"not listed in -peers"},
	{"POD_NAME not defined", func(m *manifests) {
		c := container(m, "storage")
		c.Env = slices.DeleteFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "POD_NAME" })
	}, "undefined $(POD_NAME)"},
	{"variable used before it is defined", func(m *manifests) {
		c := container(m, "storage")
		c.Env = append([]corev1.EnvVar{{Name: "SLUICE_RACK", Value: "$(POD_NAME)"}}, c.Env...)
	}, "env SLUICE_RACK: undefined $(POD_NAME)"},
	{"not a flag in args", func(m *manifests) { c := container(m, "metadata"); c.Args = append(c.Args, "metadata") },
		`args: "metadata" is not a flag`},
	{"command replaces the entrypoint", func(m *manifests) { container(m, "metadata").Command = []string{"/sluice-metadata"} },
		"command is set"},

	// Storage node ids and addresses.
	{"node ids from 0", func(m *manifests) { sts(m, "storage").Spec.Ordinals = nil },
		`flag -node-id: "0" is not a positive integer`},
	{"node id from a missing label", func(m *manifests) {
		env(container(m, "storage"), "SLUICE_NODE_ID").ValueFrom.FieldRef.FieldPath = "metadata.labels['apps.kubernetes.io/pod-ordinal']"
	}, `the pod has no label "apps.kubernetes.io/pod-ordinal"`},
	{"node id from the pod name", func(m *manifests) {
		env(container(m, "storage"), "SLUICE_NODE_ID").ValueFrom.FieldRef.FieldPath = "metadata.name"
	}, `flag -node-id: "storage-1" is not a positive integer`},
	{"internal address of another pod", func(m *manifests) {
		replaceArg(container(m, "storage"), "$(POD_NAME).storage-headless:9101", "storage-1.storage-headless:9101")
	}, "flag -internal-addr: \"storage-1.storage-headless:9101\" is not this pod's storage port"},
	{"advertised address on the admin port", func(m *manifests) {
		c := container(m, "storage")
		c.Args[slices.Index(c.Args, "-advertised-addr")+1] = "$(POD_NAME).storage-headless:9111"
	}, "flag -advertised-addr"},

	// ConfigMap references.
	{"configMapKeyRef to a missing key", func(m *manifests) {
		env(container(m, "storage"), "SLUICE_METADATA").ValueFrom.ConfigMapKeyRef.Key = "METADATA"
	}, `has no key "METADATA"`},
	{"configMapKeyRef to a missing ConfigMap", func(m *manifests) {
		env(container(m, "offsets"), "SLUICE_METADATA").ValueFrom.ConfigMapKeyRef.Name = "sluice-endpoint"
	}, `ConfigMap "sluice-endpoint" does not exist`},
	{"envFrom a missing ConfigMap", func(m *manifests) { container(m, "frontend").EnvFrom[0].ConfigMapRef.Name = "endpoints" },
		`envFrom: ConfigMap "endpoints" does not exist`},
	{"URL on a port the Service lacks", func(m *manifests) { m.configMaps[0].Data["SLUICE_METADATA"] = "http://metadata:7071" },
		"Service metadata has no port 7071"},
	{"offsets URL reaching metadata", func(m *manifests) { m.configMaps[0].Data["SLUICE_OFFSETS"] = "http://metadata:7070" },
		"want the http port of offsets"},
	{"URL naming no Service", func(m *manifests) { m.configMaps[0].Data["SLUICE_METADATA"] = "http://sluice-metadata:7070" },
		`no Service named "sluice-metadata"`},
	{"URL to a headless Service", func(m *manifests) { m.configMaps[0].Data["SLUICE_OFFSETS"] = "http://offsets-headless:7080" },
		"offsets-headless is headless"},
	{"URL without a scheme", func(m *manifests) { m.configMaps[0].Data["SLUICE_METADATA"] = "metadata:7070" },
		"is not an http://host:port URL"},
	{"key a binary needs missing", func(m *manifests) { delete(m.configMaps[0].Data, "SLUICE_OFFSETS") },
		"flag -offsets is not set"},

	// Images.
	{"image tag", func(m *manifests) { container(m, "metadata").Image = "sluice/metadata:latest" },
		`image "sluice/metadata:latest", want "sluice/metadata:dev"`},
	{"image of another service", func(m *manifests) { container(m, "offsets").Image = "sluice/metadata:dev" },
		`want "sluice/offsets:dev"`},
	{"pull policy", func(m *manifests) { container(m, "frontend").ImagePullPolicy = corev1.PullAlways },
		"imagePullPolicy"},

	// Volumes and the data directory.
	{"volume mounted elsewhere", func(m *manifests) { container(m, "storage").VolumeMounts[0].MountPath = "/var/lib/sluice" },
		"no volume claim template mounted at /data"},
	{"claim template renamed", func(m *manifests) { sts(m, "offsets").Spec.VolumeClaimTemplates[0].Name = "state" },
		"no volume claim template mounted at /data"},
	{"data dir off the volume", func(m *manifests) { env(container(m, "metadata"), "SLUICE_DATA_DIR").Value = "/tmp/data" },
		`-data-dir "/tmp/data", want /data`},
	{"data dir flag off the volume", func(m *manifests) {
		c := container(m, "storage")
		c.Args = append(c.Args, "-data-dir", "/data/../srv")
	}, `-data-dir "/data/../srv"`},
	{"claim without storage request", func(m *manifests) {
		sts(m, "metadata").Spec.VolumeClaimTemplates[0].Spec.Resources.Requests = nil
	}, "no storage request"},
	{"claim shared between nodes", func(m *manifests) {
		sts(m, "storage").Spec.VolumeClaimTemplates[0].Spec.AccessModes = []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}
	}, "accessModes must be [ReadWriteOnce]"},

	// Disruption budgets.
	{"PDB selecting nothing", func(m *manifests) { pdb(m, "storage").Spec.Selector.MatchLabels[componentLabel] = "storag" },
		"selects 0 workloads"},
	{"PDB breaking a quorum", func(m *manifests) { two := intstr.FromInt32(2); pdb(m, "metadata").Spec.MaxUnavailable = &two },
		"loses the quorum"},
	{"PDB blocking drains", func(m *manifests) { two := intstr.FromInt32(2); pdb(m, "frontend").Spec.MinAvailable = &two },
		"allows no disruption"},
	{"PDB with both bounds", func(m *manifests) { one := intstr.FromInt32(1); pdb(m, "offsets").Spec.MinAvailable = &one },
		"set exactly one of minAvailable and maxUnavailable"},
	{"workload without PDB", func(m *manifests) {
		m.pdbs = slices.DeleteFunc(m.pdbs, func(p *policyv1.PodDisruptionBudget) bool { return p.Name == "offsets" })
	}, "StatefulSet offsets: covered by 0 PodDisruptionBudgets"},

	// The autoscaler.
	{"HPA target missing", func(m *manifests) { m.hpas[0].Spec.ScaleTargetRef.Name = "frontends" },
		"names no workload"},
	{"HPA target of the wrong kind", func(m *manifests) { m.hpas[0].Spec.ScaleTargetRef.Kind = "StatefulSet" },
		"names no workload"},
	{"HPA on a raft group", func(m *manifests) {
		m.hpas[0].Spec.ScaleTargetRef = autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "metadata"}
	}, "fixed membership"},
	{"HPA bounds", func(m *manifests) { eleven := int32(11); m.hpas[0].Spec.MinReplicas = &eleven },
		"minReplicas 11 and maxReplicas 10"},
	{"Deployment outside the HPA bounds", func(m *manifests) { one := int32(1); m.deployments[0].Spec.Replicas = &one },
		"starts at 1 replicas, outside 2..10"},
	{"HPA without a cpu request", func(m *manifests) { delete(container(m, "frontend").Resources.Requests, corev1.ResourceCPU) },
		"cpu utilization needs a cpu request"},

	// Resources and security.
	{"memory limit missing", func(m *manifests) { delete(container(m, "storage").Resources.Limits, corev1.ResourceMemory) },
		"resources need a memory limit"},
	{"memory limit below request", func(m *manifests) {
		container(m, "metadata").Resources.Limits[corev1.ResourceMemory] = resource.MustParse("128Mi")
	}, "memory limit below its request"},
	{"writable root filesystem", func(m *manifests) { f := false; container(m, "frontend").SecurityContext.ReadOnlyRootFilesystem = &f },
		"readOnlyRootFilesystem must be true"},
	{"privilege escalation", func(m *manifests) { container(m, "offsets").SecurityContext.AllowPrivilegeEscalation = nil },
		"allowPrivilegeEscalation must be false"},
	{"root allowed", func(m *manifests) { f := false; sts(m, "storage").Spec.Template.Spec.SecurityContext.RunAsNonRoot = &f },
		"runAsNonRoot must be true"},
	{"service links on", func(m *manifests) { sts(m, "metadata").Spec.Template.Spec.EnableServiceLinks = nil },
		"enableServiceLinks must be false"},

	// The kustomization.
	{"kustomization misses a file", func(m *manifests) {
		m.kustomization.Resources = slices.DeleteFunc(m.kustomization.Resources, func(r string) bool { return r == "storage.yaml" })
	}, "storage.yaml is not listed"},
	{"kustomization lists a missing file", func(m *manifests) { m.kustomization.Resources = append(m.kustomization.Resources, "rbac.yaml") },
		"resource rbac.yaml is not a manifest"},
	{"kustomization lists a file twice", func(m *manifests) {
		m.kustomization.Resources = append(m.kustomization.Resources, m.kustomization.Resources[0])
	}, "listed twice"},
	{"kustomization namespace", func(m *manifests) { m.kustomization.Namespace = "prod" },
		`kustomization: namespace "prod" is hard-coded`},
}

// Helpers for the mutations; a name that is not there is a bug of the table.

func sts(m *manifests, name string) *appsv1.StatefulSet {
	for _, s := range m.statefulSets {
		if s.Name == name {
			return s
		}
	}
	panic("no StatefulSet " + name)
}

func svc(m *manifests, name string) *corev1.Service {
	if s := m.service(name); s != nil {
		return s
	}
	panic("no Service " + name)
}

func pdb(m *manifests, name string) *policyv1.PodDisruptionBudget {
	for _, p := range m.pdbs {
		if p.Name == name {
			return p
		}
	}
	panic("no PodDisruptionBudget " + name)
}

// container returns the first container of the workload of that name.
func container(m *manifests, workloadName string) *corev1.Container {
	for _, w := range m.workloads() {
		if w.name == workloadName {
			return &w.template.Spec.Containers[0]
		}
	}
	panic("no workload " + workloadName)
}

func env(c *corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	panic("no env " + name + " in container " + c.Name)
}

func port(c *corev1.Container, name string) *corev1.ContainerPort {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return &c.Ports[i]
		}
	}
	panic("no port " + name + " in container " + c.Name)
}

// replaceArg replaces old by new in every argument, and panics when none
// contained it.
func replaceArg(c *corev1.Container, old, new string) {
	found := false
	for i, a := range c.Args {
		if strings.Contains(a, old) {
			c.Args[i] = strings.ReplaceAll(a, old, new)
			found = true
		}
	}
	if !found {
		panic("no argument of container " + c.Name + " contains " + old)
	}
}
