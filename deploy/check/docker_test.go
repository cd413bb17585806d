package check

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"
	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

// TestDockerfile parses deploy/docker/Dockerfile with BuildKit's parser, as docker build would,
// and checks what the image promises: a build stage and a final one, a static build, a nonroot
// user, the state directory as a volume, and a HEALTHCHECK on /liveness with a binary that is in
// the image.
func TestDockerfile(t *testing.T) {
	b, err := readRepo("deploy", "docker", "Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	res, err := parser.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("BuildKit's parser: %v", err)
	}
	for _, w := range res.Warnings {
		t.Errorf("BuildKit warns: %s", w.Short)
	}
	stages, metaArgs, err := instructions.Parse(res.AST, nil)
	if err != nil {
		t.Fatalf("BuildKit's instructions: %v", err)
	}
	if len(stages) != 2 || len(metaArgs) == 0 {
		t.Fatalf("%d stages and %d global ARGs; want a build stage and the final one", len(stages), len(metaArgs))
	}
	if stages[0].Name != "build" {
		t.Errorf("first stage %q, want build", stages[0].Name)
	}
	final := stages[len(stages)-1]
	if !strings.HasPrefix(final.BaseName, "gcr.io/distroless/static") {
		t.Errorf("final base %s, want distroless static", final.BaseName)
	}
	var (
		user, entry string
		volumes     []string
		health      *instructions.HealthCheckCommand
		copied      []string
		static      bool
	)
	for _, cmd := range stages[0].Commands {
		if r, ok := cmd.(*instructions.RunCommand); ok && strings.Contains(strings.Join(r.CmdLine, " "), "CGO_ENABLED=0") {
			static = true
		}
	}
	for _, cmd := range final.Commands {
		switch c := cmd.(type) {
		case *instructions.UserCommand:
			user = c.User
		case *instructions.VolumeCommand:
			volumes = append(volumes, c.Volumes...)
		case *instructions.HealthCheckCommand:
			health = c
		case *instructions.EntrypointCommand:
			entry = strings.Join(c.CmdLine, " ")
		case *instructions.CopyCommand:
			copied = append(copied, c.SourcePaths...)
		}
	}
	if !static {
		t.Error("the build stage does not build with CGO_ENABLED=0: the binary would not run on a static base")
	}
	if user == "" || user == "root" || strings.HasPrefix(user, "0") {
		t.Errorf("USER %q; want a nonroot user", user)
	}
	if !slices.Contains(volumes, "/var/lib/meshgw") {
		t.Errorf("VOLUME %v; want /var/lib/meshgw, the state directory", volumes)
	}
	if entry != "/usr/local/bin/meshgw" {
		t.Errorf("ENTRYPOINT %q, want /usr/local/bin/meshgw", entry)
	}
	if health == nil || health.Health == nil {
		t.Fatal("no HEALTHCHECK")
	}
	test := health.Health.Test
	if len(test) < 2 || test[0] != "CMD" || !slices.Contains(test, "liveness") {
		t.Errorf("HEALTHCHECK %v; want an exec form that asks /liveness", test)
	}
	if len(test) > 1 && !slices.Contains(copied, "/out/"+strings.TrimPrefix(test[1], "/usr/local/bin/")) {
		t.Errorf("HEALTHCHECK runs %s, which no COPY puts in the image (copied: %v)", test[1], copied)
	}
}

// loadCompose loads deploy/docker/compose.yaml with compose-go, the loader docker compose uses:
// it resolves the anchors and merge keys, interpolates the variables and validates the file
// against the compose specification's schema.
func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	opts, err := cli.NewProjectOptions([]string{repoPath("deploy", "docker", "compose.yaml")},
		cli.WithWorkingDirectory(repoPath("deploy", "docker")), cli.WithName("meshgw"), cli.WithEnv([]string{}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatalf("compose-go: %v", err)
	}
	return p
}

// TestCompose: three gateways that bootstrap together and join each other by service name,
// three fake engines, every port published on loopback only, and a named volume per gateway on
// the image's state directory.
func TestCompose(t *testing.T) {
	p := loadCompose(t)
	var gateways, engines []types.ServiceConfig
	for _, s := range p.Services {
		if isGateway(s.Entrypoint) {
			gateways = append(gateways, s)
		} else if slices.Equal(s.Entrypoint, []string{"/usr/local/bin/fakeworker"}) {
			engines = append(engines, s)
		}
	}
	if len(gateways) != 3 || len(engines) != 3 {
		t.Fatalf("%d gateways and %d fake engines; want 3 and 3", len(gateways), len(engines))
	}
	volumes := map[string]bool{}
	for _, g := range gateways {
		cmd := strings.Join(g.Command, " ")
		for _, want := range []string{"--bootstrap-expect 3", "--join ", "--mesh-advertise-host " + g.Name, "--node-id " + g.Name} {
			if !strings.Contains(cmd, want) {
				t.Errorf("%s: command %q lacks %q", g.Name, cmd, want)
			}
		}
		if !strings.Contains(cmd, "--insecure") && !strings.Contains(cmd, "--tls-cert") {
			t.Errorf("%s: neither TLS nor --insecure: meshgw exits 2 when raft binds beyond loopback", g.Name)
		}
		var named bool
		for _, v := range g.Volumes {
			if v.Type == types.VolumeTypeVolume && v.Target == "/var/lib/meshgw" {
				named = true
				if volumes[v.Source] {
					t.Errorf("%s shares the volume %s with another gateway", g.Name, v.Source)
				}
				volumes[v.Source] = true
				if _, ok := p.Volumes[v.Source]; !ok {
					t.Errorf("%s: volume %s is not declared", g.Name, v.Source)
				}
			}
		}
		if !named {
			t.Errorf("%s: no named volume on /var/lib/meshgw", g.Name)
		}
		if g.Build == nil || g.Build.Dockerfile != "deploy/docker/Dockerfile" {
			t.Errorf("%s: not built from deploy/docker/Dockerfile", g.Name)
		}
	}
	for _, s := range append(gateways, engines...) {
		if len(s.Ports) == 0 {
			t.Errorf("%s publishes no port", s.Name)
		}
		for _, port := range s.Ports {
			if port.HostIP != "127.0.0.1" {
				t.Errorf("%s publishes %s on %q; want 127.0.0.1 (plaintext raft, demo admin key)", s.Name, port.Published, port.HostIP)
			}
		}
	}
}
