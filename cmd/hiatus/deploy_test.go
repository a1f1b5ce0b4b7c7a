package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// deployDir holds the image's build file and the Kubernetes manifests of
// docs/cluster.md.
const deployDir = "../../deploy"

// manifests reads the objects of a multi-document YAML file in deploy/,
// each decoded strictly into the Kubernetes API's own type for its kind,
// so that a field misspelt or of the wrong type fails as kubectl's schema
// validation would (kubectl needs a cluster even for a dry run).
func manifests(t *testing.T, name string) []any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(deployDir, name))
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	for _, doc := range regexp.MustCompile(`(?m)^---$`).Split(string(b), -1) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var obj any
		switch tm.APIVersion + " " + tm.Kind {
		case "batch/v1 Job":
			obj = &batchv1.Job{}
		case "v1 PersistentVolumeClaim":
			obj = &corev1.PersistentVolumeClaim{}
		default:
			t.Fatalf("%s: an object of kind %q, %q", name, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, obj)
	}
	return out
}

// mountedClaim returns the container's only volume mount's path and the
// claim of the volume it mounts.
func mountedClaim(t *testing.T, what string, spec corev1.PodSpec) (mount, claim string) {
	t.Helper()
	if len(spec.Containers) != 1 || len(spec.Containers[0].VolumeMounts) != 1 || len(spec.Volumes) != 1 ||
		spec.Volumes[0].PersistentVolumeClaim == nil || spec.Containers[0].VolumeMounts[0].Name != spec.Volumes[0].Name {
		t.Fatalf("%s: want one container mounting one claimed volume, got %+v", what, spec)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("%s: restartPolicy %q, want Never: a retried cell starts a new pod, with new throwaway servers", what, spec.RestartPolicy)
	}
	return spec.Containers[0].VolumeMounts[0].MountPath, spec.Volumes[0].PersistentVolumeClaim.ClaimName
}

// TestDeploy: the Indexed Job of deploy/grid-job.yaml runs as many pods as
// its grid has cells — its container's arguments, less --cell and
// --grid-dir, are a grid `hiatus compare --list-cells` lists — each making
// the cell of its JOB_COMPLETION_INDEX into a directory of the volume every
// pod shares; grid-collect.yaml collects that directory; and the image
// those use is built by deploy/Dockerfile, static, with redis-server and
// PostgreSQL beside it.
func TestDeploy(t *testing.T) {
	objs := manifests(t, "grid-job.yaml")
	if len(objs) != 2 {
		t.Fatalf("grid-job.yaml: %d objects, want a claim and a Job", len(objs))
	}
	pvc, ok1 := objs[0].(*corev1.PersistentVolumeClaim)
	job, ok2 := objs[1].(*batchv1.Job)
	if !ok1 || !ok2 {
		t.Fatalf("grid-job.yaml: %T and %T, want a claim and a Job", objs[0], objs[1])
	}
	if !slices.Contains(pvc.Spec.AccessModes, corev1.ReadWriteMany) {
		t.Errorf("the claim's access modes %v: the pods, on any node, write into it at once: want ReadWriteMany", pvc.Spec.AccessModes)
	}
	spec := job.Spec
	if spec.CompletionMode == nil || *spec.CompletionMode != batchv1.IndexedCompletion || spec.Completions == nil {
		t.Fatalf("the Job: completionMode %v, completions %v; want Indexed and a count", spec.CompletionMode, spec.Completions)
	}
	mount, claim := mountedClaim(t, "the Job", spec.Template.Spec)
	if claim != pvc.Name {
		t.Errorf("the Job mounts claim %q, want %q", claim, pvc.Name)
	}
	c := spec.Template.Spec.Containers[0]
	var grid []string
	var gridDir string
	cellJob := false
	for i := 0; i < len(c.Args); i++ {
		switch c.Args[i] {
		case "--cell":
			cellJob = i+1 < len(c.Args) && c.Args[i+1] == "job"
			i++
		case "--grid-dir":
			if i+1 < len(c.Args) {
				gridDir = c.Args[i+1]
			}
			i++
		default:
			grid = append(grid, c.Args[i])
		}
	}
	// Without --cell job every pod would make the whole grid; without
	// --seed each would refuse its cell.
	if !cellJob || !slices.Contains(grid, "--seed") {
		t.Errorf("the Job's arguments %q: want --cell job (the pod's JOB_COMPLETION_INDEX) and --seed", c.Args)
	}
	if !strings.HasPrefix(gridDir, mount+"/") {
		t.Errorf("the Job's --grid-dir %q is not inside the shared volume, mounted at %q", gridDir, mount)
	}
	code, out, errOut := hiatus(t, append(grid, "--list-cells")...)
	cells := strings.Count(out, "\n")
	if code != 0 || cells == 0 || int(*spec.Completions) != cells {
		t.Errorf("the Job's grid %q: --list-cells exits %d with %d cells, and the Job completes %d\n%s%s", grid, code, cells, *spec.Completions, out, errOut)
	}
	if spec.Parallelism != nil && *spec.Parallelism > *spec.Completions {
		t.Errorf("parallelism %d beyond the %d cells", *spec.Parallelism, *spec.Completions)
	}

	objs = manifests(t, "grid-collect.yaml")
	collect, ok := objs[0].(*batchv1.Job)
	if len(objs) != 1 || !ok {
		t.Fatalf("grid-collect.yaml: %d objects, want one Job", len(objs))
	}
	cmount, cclaim := mountedClaim(t, "the collector", collect.Spec.Template.Spec)
	cc := collect.Spec.Template.Spec.Containers[0]
	if cclaim != pvc.Name || cmount != mount || !slices.Equal(cc.Args, []string{"compare", "--collect", gridDir}) || cc.Image != c.Image {
		t.Errorf("the collector: image %q, claim %q at %q, args %q; want %q, %q at %q, compare --collect %s", cc.Image, cclaim, cmount, cc.Args,
			c.Image, pvc.Name, mount, gridDir)
	}

	// The image: built static from cmd/hiatus by the Go of go.mod, run
	// beside Debian's servers.
	b, err := os.ReadFile(filepath.Join(deployDir, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	docker := string(b)
	for _, want := range []string{"FROM golang:" + string(goVersion[1]) + "-", "CGO_ENABLED=0 go build", "./cmd/hiatus",
		"install -y --no-install-recommends redis-server postgresql", `ENTRYPOINT ["/usr/local/bin/hiatus"]`,
		"docker build -f deploy/Dockerfile -t " + strings.TrimSuffix(c.Image, ":latest") + " ."} {
		if !strings.Contains(docker, want) {
			t.Errorf("deploy/Dockerfile lacks %q", want)
		}
	}
}
