package deploy

import (
	"bufio"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const unitPath = "systemd/strand.service"

// unitForAnalysis copies the unit into a temporary directory with its
// ExecStart binary replaced by one that exists here (verify checks the
// executable), and returns the copy's path.
func unitForAnalysis(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const bin = "/usr/local/bin/strand"
	if !strings.Contains(string(b), "ExecStart="+bin+" serve") {
		t.Fatalf("%s: no ExecStart=%s serve", unitPath, bin)
	}
	path := filepath.Join(t.TempDir(), "strand.service")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(string(b), bin, exe)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSystemdUnitListeners: the unit's example settings listen on every
// interface on the ports the image does (the Dockerfile's ENV), so that
// a port documented for one is documented for the other.
func TestSystemdUnitListeners(t *testing.T) {
	listen := regexp.MustCompile(`(STRAND_\w+_LISTEN)=(:\d+)`)
	found := func(text string) map[string]string {
		got := map[string]string{}
		for _, m := range listen.FindAllStringSubmatch(text, -1) {
			got[m[1]] = m[2]
		}
		return got
	}
	unit, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, stage := range parseDockerfile(t, "../Dockerfile") {
		for _, in := range stage {
			if in.cmd == "ENV" {
				env = append(env, in.args)
			}
		}
	}
	image := found(strings.Join(env, " "))
	if len(image) < 3 {
		t.Fatalf("the Dockerfile's ENV listens on %v, want the Kafka, HTTP and schema registry ports", image)
	}
	if got := found(string(unit)); !maps.Equal(got, image) {
		t.Errorf("%s's example settings listen on %v, the image on %v", unitPath, got, image)
	}
}

func systemdAnalyze(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	return p
}

// TestSystemdUnitVerifies runs systemd-analyze verify on the unit. verify
// exits 0 on unknown or misspelled keys, which it only warns of, so any
// output at all fails the test.
func TestSystemdUnitVerifies(t *testing.T) {
	sa := systemdAnalyze(t)
	out, err := exec.Command(sa, "verify", unitForAnalysis(t)).CombinedOutput()
	if err != nil || len(out) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// TestSystemdUnitHardening checks the directives the agent relies on
// (a restart after exit status 3, a state directory) and the hardening,
// and that systemd's own offline assessment rates the unit's exposure OK.
func TestSystemdUnitHardening(t *testing.T) {
	f, err := os.Open(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	set := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			set[k] = v
		}
	}
	for k, want := range map[string]string{
		"Restart":          "on-failure",
		"StateDirectory":   "strand",
		"ProtectSystem":    "strict",
		"NoNewPrivileges":  "yes",
		"DynamicUser":      "yes",
		"PrivateTmp":       "yes",
		"ProtectHome":      "yes",
		"RestrictSUIDSGID": "yes",
	} {
		if set[k] != want {
			t.Errorf("%s=%q, want %q", k, set[k], want)
		}
	}
	if !strings.Contains(set["ExecStart"], "--data-dir=%S/strand") {
		t.Errorf("ExecStart %q does not keep its data in the StateDirectory", set["ExecStart"])
	}

	sa := systemdAnalyze(t)
	out, err := exec.Command(sa, "security", "--offline=true", unitForAnalysis(t)).CombinedOutput()
	m := regexp.MustCompile(`Overall exposure level for strand.service: ([0-9.]+) (\S+)`).FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security: %v, no overall exposure level in\n%s", err, out)
	}
	if string(m[2]) != "OK" {
		t.Errorf("systemd rates the unit's exposure %s %s, want OK\n%s", m[1], m[2], out)
	}
}
