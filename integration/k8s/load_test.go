package k8s

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The directories, relative to this package.
const (
	manifestDir   = "../../deploy/k8s"
	dockerfileDir = "../../deploy/docker"
	kustomization = "kustomization.yaml"
)

// manifests is everything deploy/k8s holds, decoded.
type manifests struct {
	files         []string // the YAML files besides kustomization.yaml, sorted
	kustomization kustomizeFile

	statefulSets []*appsv1.StatefulSet
	deployments  []*appsv1.Deployment
	services     []*corev1.Service
	configMaps   []*corev1.ConfigMap
	pdbs         []*policyv1.PodDisruptionBudget
	hpas         []*autoscalingv2.HorizontalPodAutoscaler

	// imageEnv holds each image's ENV lines from its Dockerfile
	// ("sluice/metadata" -> SLUICE_DATA_DIR -> /data): the binary sees them
	// under the container's own env.
	imageEnv map[string]map[string]string
}

// kustomizeFile is the part of kustomization.yaml this repository uses;
// decoding is strict, so a misspelt field fails.
type kustomizeFile struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Namespace  string           `json:"namespace,omitempty"`
	Resources  []string         `json:"resources"`
	Images     []kustomizeImage `json:"images,omitempty"`
}

type kustomizeImage struct {
	Name    string `json:"name"`
	NewName string `json:"newName,omitempty"`
	NewTag  string `json:"newTag,omitempty"`
	Digest  string `json:"digest,omitempty"`
}

// loadManifests reads and decodes every file of dir and the image ENV lines of
// the Dockerfiles in dockerDir.
func loadManifests(dir, dockerDir string) (*manifests, error) {
	m := &manifests{}
	names, err := filepath.Glob(filepath.Join(dir, "*"))
	if err != nil {
		return nil, err
	}
	for _, path := range names {
		base := filepath.Base(path)
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		switch {
		case base == kustomization:
			if err := yaml.UnmarshalStrict(data, &m.kustomization); err != nil {
				return nil, fmt.Errorf("%s: %w", base, err)
			}
		case strings.HasSuffix(base, ".yaml") || strings.HasSuffix(base, ".yml"):
			m.files = append(m.files, base)
			if err := m.decodeFile(base, data); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%s: not a YAML file; deploy/k8s holds manifests only", base)
		}
	}
	sort.Strings(m.files)
	if m.imageEnv, err = loadImageEnv(dockerDir); err != nil {
		return nil, err
	}
	return m, nil
}

var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// splitDocuments splits a multi-document YAML file on its "---" lines and
// drops documents that hold only comments or blanks.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	for _, doc := range documentSeparator.Split(string(data), -1) {
		blank := true
		for _, line := range strings.Split(doc, "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				blank = false
				break
			}
		}
		if !blank {
			docs = append(docs, []byte(doc))
		}
	}
	return docs
}

// decodeFile decodes each document of a file into its typed object, strictly:
// a field the type does not have, or a key given twice, is an error.
func (m *manifests) decodeFile(name string, data []byte) error {
	docs := splitDocuments(data)
	if len(docs) == 0 {
		return fmt.Errorf("%s: no document", name)
	}
	for i, doc := range docs {
		if err := m.decodeDocument(doc); err != nil {
			return fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
	}
	return nil
}

func (m *manifests) decodeDocument(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 StatefulSet":
		return decodeStrict(doc, &m.statefulSets)
	case "apps/v1 Deployment":
		return decodeStrict(doc, &m.deployments)
	case "v1 Service":
		return decodeStrict(doc, &m.services)
	case "v1 ConfigMap":
		return decodeStrict(doc, &m.configMaps)
	case "policy/v1 PodDisruptionBudget":
		return decodeStrict(doc, &m.pdbs)
	case "autoscaling/v2 HorizontalPodAutoscaler":
		return decodeStrict(doc, &m.hpas)
	}
	return fmt.Errorf("apiVersion %q kind %q: not a kind these manifests use", tm.APIVersion, tm.Kind)
}

func decodeStrict[T any](doc []byte, into *[]*T) error {
	obj := new(T)
	if err := yaml.UnmarshalStrict(doc, obj); err != nil {
		return err
	}
	*into = append(*into, obj)
	return nil
}

// loadImageEnv reads the ENV lines of every <service>.Dockerfile, keyed by
// the image name sluice/<service>.
func loadImageEnv(dir string) (map[string]map[string]string, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.Dockerfile"))
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no Dockerfile in %s", dir)
	}
	out := map[string]map[string]string{}
	for _, path := range paths {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		env := map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(data))
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			if len(fields) == 0 || fields[0] != "ENV" {
				continue
			}
			for _, kv := range fields[1:] {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return nil, fmt.Errorf("%s: ENV %q: only the KEY=VALUE form is read here", path, kv)
				}
				env[k] = v
			}
		}
		out["sluice/"+strings.TrimSuffix(filepath.Base(path), ".Dockerfile")] = env
	}
	return out, nil
}
