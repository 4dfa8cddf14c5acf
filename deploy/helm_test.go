package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/strandkafka/strand/internal/testservers/testproc"
)

const (
	// helmVersion is the Helm release the chart is checked with.
	helmVersion = "v3.22.0"
	// helmEnv names the helm binary; scripts/test builds it from the Go
	// module (go install helm.sh/helm/v3/cmd/helm@v3.22.0) into the user
	// cache directory and sets it.
	helmEnv = "STRAND_HELM"
	chart   = "helm/strand"
)

// findHelm returns the pinned helm binary: STRAND_HELM, else where
// scripts/test installs it. Missing, the test skips, or fails in CI.
func findHelm(t *testing.T) string {
	t.Helper()
	path := os.Getenv(helmEnv)
	if path == "" {
		if cache, err := os.UserCacheDir(); err == nil {
			path = filepath.Join(cache, "strand", "helm-"+helmVersion, "helm")
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode()&0o111 == 0 {
		testproc.SkipOrFail(t, fmt.Errorf("%w: helm %s at %q (%s); build it with `GOBIN=DIR go install helm.sh/helm/v3/cmd/helm@%s` and set %s=DIR/helm",
			testproc.ErrNoBinary, helmVersion, path, helmEnv, helmVersion, helmEnv))
	}
	return path
}

func runHelm(t *testing.T, helm string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helm, args...)
	// Helm keeps caches and config under HOME; keep this test's own.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// manifests is helm template's output, by kind.
type manifests map[string][]map[string]any

func render(t *testing.T, helm string, sets ...string) manifests {
	t.Helper()
	args := []string{"template", "rel", chart, "--namespace", "streams", "-f", chart + "/ci/test-values.yaml"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out, err := runHelm(t, helm, args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	m := manifests{}
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("helm template output: %v\n%s", err, out)
		}
		if doc == nil {
			continue
		}
		kind, _ := doc["kind"].(string)
		m[kind] = append(m[kind], doc)
	}
	return m
}

// dig walks a decoded manifest by map keys and list indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			l, _ := v.([]any)
			if k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// wantArgs fails t for each of want that args lack.
func wantArgs(t *testing.T, args []string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !slices.Contains(args, w) {
			t.Errorf("args lack %q: %q", w, args)
		}
	}
}

func strs(v any) []string {
	var out []string
	for _, e := range v.([]any) {
		out = append(out, fmt.Sprint(e))
	}
	return out
}

func TestHelmLint(t *testing.T) {
	helm := findHelm(t)
	for _, sets := range [][]string{
		nil,
		{"tls.enabled=true,tls.secretName=strand-tls,tls.http=true,sasl.enabled=true,serviceMonitor.enabled=true"},
		{"service.schemaRegistryPort=0"},
	} {
		args := []string{"lint", "--strict", chart, "-f", chart + "/ci/test-values.yaml"}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		out, err := runHelm(t, helm, args...)
		if err != nil || !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestHelmTemplateRequiresBackends: agents keep no data, so a chart
// without the shared object store and log must not render.
func TestHelmTemplateRequiresBackends(t *testing.T) {
	helm := findHelm(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"template", "rel", chart}, "objstore.url is required"},
		{[]string{"template", "rel", chart, "--set", "objstore.url=s3://b/p"}, "log.url is required"},
		{[]string{"template", "rel", chart, "-f", chart + "/ci/test-values.yaml", "--set", "tls.enabled=true"}, "tls.secretName is required"},
	} {
		out, err := runHelm(t, helm, tt.args...)
		if err == nil || !strings.Contains(out, tt.want) {
			t.Errorf("helm %s: %v, want a failure with %q\n%s", strings.Join(tt.args, " "), err, tt.want, out)
		}
	}
}

// TestHelmTemplateDefaults renders the chart with only the backends set.
func TestHelmTemplateDefaults(t *testing.T) {
	m := render(t, findHelm(t))
	for kind, n := range map[string]int{"StatefulSet": 1, "Service": 2, "PodDisruptionBudget": 1, "ServiceMonitor": 0, "Deployment": 0} {
		if len(m[kind]) != n {
			t.Errorf("%d %s manifests, want %d", len(m[kind]), kind, n)
		}
	}
	if len(m["StatefulSet"]) != 1 {
		t.FailNow()
	}
	sts := m["StatefulSet"][0]
	if v := dig(sts, "spec", "volumeClaimTemplates"); v != nil {
		t.Errorf("StatefulSet claims volumes %v: agents keep no state", v)
	}
	var headless map[string]any
	for _, s := range m["Service"] {
		if dig(s, "spec", "clusterIP") == "None" {
			headless = s
		}
	}
	if headless == nil || dig(sts, "spec", "serviceName") != dig(headless, "metadata", "name") {
		t.Errorf("StatefulSet serviceName %v is not the headless Service (%v)", dig(sts, "spec", "serviceName"), dig(headless, "metadata", "name"))
	}
	c := dig(sts, "spec", "template", "spec", "containers", 0)
	args := strs(dig(c, "args"))
	wantArgs(t, args,
		"serve",
		"--node-id-from-hostname",
		"--objstore=s3://strand-data/cluster-a?region=us-east-1",
		"--log=postgres://strand@postgres:5432/strand",
		"--listeners=PLAINTEXT://:9092",
		"--advertised-listeners=PLAINTEXT://$(POD_NAME).rel-strand-headless.$(POD_NAMESPACE).svc.cluster.local:9092",
		"--http-listen=:9644",
		"--schema-registry-listen=:8081",
		"--console=false",
		"--data-dir=/var/lib/strand",
	)
	for _, a := range args {
		if strings.HasPrefix(a, "--tls") || strings.HasPrefix(a, "--sasl") || strings.HasPrefix(a, "--admin-token") {
			t.Errorf("arg %q without TLS, SASL or an admin token configured", a)
		}
	}
	if v := dig(sts, "spec", "template", "spec", "volumes", 0, "emptyDir"); v == nil {
		t.Errorf("data volume is not an emptyDir: %v", dig(sts, "spec", "template", "spec", "volumes"))
	}
	if dig(sts, "spec", "template", "spec", "securityContext", "runAsNonRoot") != true {
		t.Error("pod does not set runAsNonRoot")
	}
	if dig(c, "readinessProbe", "httpGet", "path") != "/readyz" {
		t.Errorf("readiness probe %v, want GET /readyz", dig(c, "readinessProbe"))
	}
	wantPorts(t, m, map[string]int{"kafka": 9092, "http": 9644, "schema-registry": 8081})
}

// wantPorts fails t unless the agent container and both Services have
// exactly the named ports want, each Service port targeting the
// container's port of its name.
func wantPorts(t *testing.T, m manifests, want map[string]int) {
	t.Helper()
	if len(m["StatefulSet"]) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(m["StatefulSet"]))
	}
	container := map[string]int{}
	for _, p := range dig(m["StatefulSet"][0], "spec", "template", "spec", "containers", 0, "ports").([]any) {
		n, _ := dig(p, "containerPort").(int)
		container[fmt.Sprint(dig(p, "name"))] = n
	}
	if !maps.Equal(container, want) {
		t.Errorf("container ports %v, want %v", container, want)
	}
	if len(m["Service"]) != 2 {
		t.Fatalf("%d Services, want 2", len(m["Service"]))
	}
	for _, svc := range m["Service"] {
		got := map[string]int{}
		for _, p := range dig(svc, "spec", "ports").([]any) {
			name := fmt.Sprint(dig(p, "name"))
			if target := fmt.Sprint(dig(p, "targetPort")); target != name {
				t.Errorf("Service %v port %s targets %s", dig(svc, "metadata", "name"), name, target)
			}
			got[name], _ = dig(p, "port").(int)
		}
		if !maps.Equal(got, want) {
			t.Errorf("Service %v ports %v, want %v", dig(svc, "metadata", "name"), got, want)
		}
	}
}

// TestHelmTemplateSchemaRegistry: service.schemaRegistryPort moves the
// registry's port, and 0 or empty turns the registry off, which takes an
// explicit empty --schema-registry-listen: the image listens on :8081.
func TestHelmTemplateSchemaRegistry(t *testing.T) {
	helm := findHelm(t)
	for _, tt := range []struct {
		set   string
		arg   string
		ports map[string]int
	}{
		{"service.schemaRegistryPort=18081", "--schema-registry-listen=:18081", map[string]int{"kafka": 9092, "http": 9644, "schema-registry": 18081}},
		{"service.schemaRegistryPort=0", "--schema-registry-listen=", map[string]int{"kafka": 9092, "http": 9644}},
		{"service.schemaRegistryPort=", "--schema-registry-listen=", map[string]int{"kafka": 9092, "http": 9644}},
	} {
		t.Run(tt.set, func(t *testing.T) {
			m := render(t, helm, tt.set)
			wantPorts(t, m, tt.ports)
			var got []string
			for _, a := range strs(dig(m["StatefulSet"][0], "spec", "template", "spec", "containers", 0, "args")) {
				if strings.HasPrefix(a, "--schema-registry-listen") {
					got = append(got, a)
				}
			}
			if !slices.Equal(got, []string{tt.arg}) {
				t.Errorf("registry args %q, want %q", got, tt.arg)
			}
		})
	}
}

// TestHelmTemplateSecrets renders the chart with TLS, SASL, the admin
// token and the log password from secrets, credentials for the object
// store, a ServiceMonitor and extra args, and checks each secret is
// mounted where the flag naming its file points.
func TestHelmTemplateSecrets(t *testing.T) {
	m := render(t, findHelm(t),
		"tls.enabled=true,tls.secretName=strand-tls,tls.clientAuth=required,tls.http=true",
		"sasl.enabled=true,sasl.bootstrapUser=admin,sasl.bootstrapPasswordSecret.name=strand-sasl",
		"adminTokenSecret.name=strand-admin,log.passwordSecret.name=strand-pg,log.passwordSecret.key=pw",
		"objstore.credentialsSecret=strand-s3",
		"serviceMonitor.enabled=true,serviceMonitor.tlsConfig.serverName=strand,replicaCount=5,memoryBudget=768MiB",
		"extraArgs[0]=--authorizer=standard,extraArgs[1]=--super-users=User:admin",
		"resources.limits.memory=2Gi",
		"console=true",
	)
	if len(m["ServiceMonitor"]) != 1 || len(m["StatefulSet"]) != 1 {
		t.Fatalf("%d ServiceMonitors and %d StatefulSets, want 1 and 1", len(m["ServiceMonitor"]), len(m["StatefulSet"]))
	}
	if s := dig(m["ServiceMonitor"][0], "spec", "endpoints", 0, "scheme"); s != "https" {
		t.Errorf("ServiceMonitor scheme %v with tls.http, want https", s)
	}
	if s := dig(m["ServiceMonitor"][0], "spec", "endpoints", 0, "tlsConfig", "serverName"); s != "strand" {
		t.Errorf("ServiceMonitor tlsConfig.serverName %v, want strand", s)
	}
	pod := dig(m["StatefulSet"][0], "spec", "template", "spec")
	c := dig(pod, "containers", 0)
	if r := dig(m["StatefulSet"][0], "spec", "replicas"); r != 5 {
		t.Errorf("replicas %v, want 5", r)
	}
	if l := dig(c, "resources", "limits", "memory"); l != "2Gi" {
		t.Errorf("memory limit %v, want 2Gi", l)
	}
	if s := dig(c, "readinessProbe", "httpGet", "scheme"); s != "HTTPS" {
		t.Errorf("readiness probe scheme %v with tls.http, want HTTPS", s)
	}
	if s := dig(c, "envFrom", 0, "secretRef", "name"); s != "strand-s3" {
		t.Errorf("envFrom secret %v, want strand-s3", s)
	}
	args := strs(dig(c, "args"))
	wantArgs(t, args,
		"--listeners=SASL_SSL://:9092",
		"--tls-client-auth=required",
		"--http-tls",
		"--sasl-bootstrap-user=admin",
		"--memory-budget=768MiB",
		"--authorizer=standard",
		"--super-users=User:admin",
		"--console=true",
	)
	// Every file flag names a file in a mounted secret, the right one.
	secretOf := map[string]string{} // volume name -> secret
	for _, v := range dig(pod, "volumes").([]any) {
		if s := dig(v, "secret", "secretName"); s != nil {
			secretOf[dig(v, "name").(string)] = s.(string)
		}
	}
	mountSecret := map[string]string{} // mount path -> secret
	for _, vm := range dig(c, "volumeMounts").([]any) {
		if s, ok := secretOf[dig(vm, "name").(string)]; ok {
			mountSecret[dig(vm, "mountPath").(string)] = s
			if dig(vm, "readOnly") != true {
				t.Errorf("secret %s mounted writable", s)
			}
		}
	}
	for flag, want := range map[string]struct{ secret, key string }{
		"--tls-cert-file":                {"strand-tls", "tls.crt"},
		"--tls-key-file":                 {"strand-tls", "tls.key"},
		"--tls-client-ca-file":           {"strand-tls", "ca.crt"},
		"--sasl-bootstrap-password-file": {"strand-sasl", "password"},
		"--admin-token-file":             {"strand-admin", "token"},
		"--log-password-file":            {"strand-pg", "pw"},
	} {
		var path string
		for _, a := range args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				path = v
			}
		}
		dir, file := filepath.Split(path)
		if path == "" || file != want.key || mountSecret[filepath.Clean(dir)] != want.secret {
			t.Errorf("%s=%q: want key %s of secret %s, mounted secrets %v", flag, path, want.key, want.secret, mountSecret)
		}
	}
}

// TestHelmTemplateRack: rack gives every agent of the release that zone;
// rackFromTopologyLabel gives each pod its own, from its zone label
// through the downward API; neither, no --rack.
func TestHelmTemplateRack(t *testing.T) {
	helm := findHelm(t)
	container := func(sets ...string) any {
		t.Helper()
		m := render(t, helm, sets...)
		if len(m["StatefulSet"]) != 1 {
			t.Fatalf("%d StatefulSets, want 1", len(m["StatefulSet"]))
		}
		return dig(m["StatefulSet"][0], "spec", "template", "spec", "containers", 0)
	}
	rackArgs := func(c any) []string {
		var out []string
		for _, a := range strs(dig(c, "args")) {
			if strings.HasPrefix(a, "--rack") {
				out = append(out, a)
			}
		}
		return out
	}
	if got := rackArgs(container()); len(got) != 0 {
		t.Errorf("rack args %q by default, want none", got)
	}
	if got := rackArgs(container("rack=us-east-1a")); !slices.Equal(got, []string{"--rack=us-east-1a"}) {
		t.Errorf("rack args %q, want --rack=us-east-1a", got)
	}
	c := container("rackFromTopologyLabel=true")
	if got := rackArgs(c); !slices.Equal(got, []string{"--rack=$(STRAND_RACK)"}) {
		t.Errorf("rack args %q, want --rack=$(STRAND_RACK)", got)
	}
	var from any
	for _, e := range dig(c, "env").([]any) {
		if dig(e, "name") == "STRAND_RACK" {
			from = dig(e, "valueFrom", "fieldRef", "fieldPath")
		}
	}
	if from != "metadata.labels['topology.kubernetes.io/zone']" {
		t.Errorf("STRAND_RACK comes from %v, want the pod's zone label", from)
	}
}
