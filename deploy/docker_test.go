package deploy

import (
	"bufio"
	"debug/elf"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// parseDockerfile reads the instructions of path, stage by stage: each
// FROM starts a new stage. Global ARGs before the first FROM are left out.
func parseDockerfile(t *testing.T, path string) [][]instruction {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		stages [][]instruction
		line   strings.Builder
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if line.Len() == 0 && (text == "" || strings.HasPrefix(text, "#")) {
			continue
		}
		if strings.HasPrefix(text, "#") {
			continue // a comment inside a continued instruction
		}
		if cont, ok := strings.CutSuffix(text, `\`); ok {
			line.WriteString(cont)
			line.WriteByte(' ')
			continue
		}
		line.WriteString(text)
		cmd, args, _ := strings.Cut(line.String(), " ")
		line.Reset()
		in := instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args)}
		if in.cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) == 0 {
			continue
		}
		stages[len(stages)-1] = append(stages[len(stages)-1], in)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return stages
}

// TestDockerfile checks what the final image promises: a numeric non-root
// USER, the Kafka, HTTP and schema registry ports, a HEALTHCHECK in exec form (the image
// has no shell) running strand healthcheck, and serve as the default.
// No Docker daemon is needed; TestDockerBuildIsStatic runs the build.
func TestDockerfile(t *testing.T) {
	stages := parseDockerfile(t, "../Dockerfile")
	if len(stages) < 2 {
		t.Fatalf("Dockerfile has %d stages, want a builder and a final one", len(stages))
	}
	final := map[string][]string{}
	for _, in := range stages[len(stages)-1] {
		final[in.cmd] = append(final[in.cmd], in.args)
	}
	users := final["USER"]
	if len(users) == 0 {
		t.Fatal("final stage has no USER: it would run as root")
	}
	uid, _, _ := strings.Cut(users[len(users)-1], ":")
	if n, err := strconv.Atoi(uid); err != nil || n == 0 {
		t.Errorf("USER %s: want a numeric non-zero uid (runAsNonRoot cannot check a name)", users[len(users)-1])
	}
	ports := map[string]bool{}
	for _, e := range final["EXPOSE"] {
		for _, p := range strings.Fields(e) {
			ports[p] = true
		}
	}
	for _, p := range []string{"9092", "9644", "8081"} {
		if !ports[p] {
			t.Errorf("EXPOSE lacks %s (have %v)", p, final["EXPOSE"])
		}
	}
	if len(final["HEALTHCHECK"]) != 1 {
		t.Fatalf("final stage has %d HEALTHCHECKs, want 1", len(final["HEALTHCHECK"]))
	}
	_, hc, ok := strings.Cut(final["HEALTHCHECK"][0], "CMD ")
	var argv []string
	if !ok || json.Unmarshal([]byte(hc), &argv) != nil {
		t.Fatalf("HEALTHCHECK %q: want CMD in exec form, [\"/strand\", \"healthcheck\"]: the image has no shell", final["HEALTHCHECK"][0])
	}
	if len(argv) < 2 || argv[0] != "/strand" || argv[1] != "healthcheck" {
		t.Errorf("HEALTHCHECK runs %v, want /strand healthcheck", argv)
	}
	var entry, cmd []string
	if len(final["ENTRYPOINT"]) != 1 || json.Unmarshal([]byte(final["ENTRYPOINT"][0]), &entry) != nil ||
		len(final["CMD"]) != 1 || json.Unmarshal([]byte(final["CMD"][0]), &cmd) != nil {
		t.Fatalf("want one exec-form ENTRYPOINT and CMD, have %q and %q", final["ENTRYPOINT"], final["CMD"])
	}
	if got := strings.Join(append(entry, cmd...), " "); got != "/strand serve" {
		t.Errorf("the image runs %q by default, want /strand serve", got)
	}
	// Loopback, serve's default, is unreachable from outside a container.
	env := strings.Join(final["ENV"], " ")
	for _, want := range []string{"STRAND_KAFKA_LISTEN=:9092", "STRAND_HTTP_LISTEN=:9644", "STRAND_SCHEMA_REGISTRY_LISTEN=:8081"} {
		if !strings.Contains(env, want) {
			t.Errorf("final stage ENV lacks %s: %q", want, env)
		}
	}
	// Every port the image listens on is exposed, and the docker run
	// the header shows publishes every exposed port.
	for _, m := range regexp.MustCompile(`STRAND_\w+_LISTEN=:(\d+)`).FindAllStringSubmatch(env, -1) {
		if !ports[m[1]] {
			t.Errorf("ENV listens on %s, which EXPOSE lacks (have %v)", m[1], final["EXPOSE"])
		}
	}
	dockerfile, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	run := regexp.MustCompile(`(?m)^#\s+docker run .*$`).Find(dockerfile)
	if run == nil {
		t.Error("the Dockerfile's header shows no docker run")
	}
	for p := range ports {
		if !strings.Contains(string(run), " -p "+p+":"+p+" ") {
			t.Errorf("the header's %q does not publish port %s", run, p)
		}
	}

	ignore, err := os.ReadFile("../.dockerignore")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\n"+string(ignore)+"\n", "\n.git\n") {
		t.Error(".dockerignore does not keep .git out of the build context")
	}
}

// TestDockerBuildIsStatic runs the Dockerfile's own go build command (its
// output path moved to a temporary directory) and checks the binary is
// static, as distroless/static needs: no ELF interpreter, no dynamic
// section. The build arguments reach the binary's version report, and
// the binary's healthcheck fails on a port with no agent.
func TestDockerBuildIsStatic(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	var build string
	for _, stage := range parseDockerfile(t, "../Dockerfile") {
		for _, in := range stage {
			if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
				build = in.args
			}
		}
	}
	const out = "-o /out/strand "
	if build == "" || !strings.Contains(build, out) {
		t.Fatalf("the builder stage has no RUN go build ... %s...", out)
	}
	// --mount options are BuildKit's, not the shell's.
	fields := strings.Fields(build)
	for len(fields) > 0 && strings.HasPrefix(fields[0], "--mount=") {
		fields = fields[1:]
	}
	bin := filepath.Join(t.TempDir(), "strand")
	script := strings.Replace(strings.Join(fields, " "), out, "-o "+bin+" ", 1)
	sh := exec.Command("sh", "-c", script)
	sh.Dir = ".."
	sh.Env = append(os.Environ(), "VERSION=v9.8.7-docker", "COMMIT=c0ffee", "BUILD_TIME=2026-12-02T09:00:00Z")
	if b, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", script, err, b)
	}

	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("binary has a %v program header: it is dynamically linked", p.Type)
		}
	}
	if f.Section(".dynamic") != nil || f.Section(".interp") != nil {
		t.Error("binary has a dynamic section")
	}

	v, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("strand version: %v\n%s", err, v)
	}
	for _, want := range []string{"strand v9.8.7-docker\n", "commit:      c0ffee\n", "build time:  2026-12-02T09:00:00Z"} {
		if !strings.Contains(string(v), want) {
			t.Errorf("strand version lacks %q:\n%s", want, v)
		}
	}
	hc := exec.Command(bin, "healthcheck", "--http", "127.0.0.1:1", "--timeout", "10s")
	if b, err := hc.CombinedOutput(); err == nil {
		t.Errorf("strand healthcheck with no agent exited 0:\n%s", b)
	} else if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("strand healthcheck with no agent: %v, want exit status 1\n%s", err, b)
	}
}
