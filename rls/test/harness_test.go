// Package test runs the service against real processes: a redis-server with the module loaded
// (RL_SERVER, RL_MODULE), this service built from ../cmd/rls, and envoyproxy/ratelimit
// (RLS_UPSTREAM, built from the Go module proxy by scripts/rls.sh) on the same Redis.
package test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	pbext "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

var ourBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "rls-test-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ourBinary = filepath.Join(dir, "rls")
	args := []string{"build", "-o", ourBinary}
	if os.Getenv("RLS_RACE") == "1" {
		args = append(args, "-race") // the service under the race detector
	}
	build := exec.Command("go", append(args, "../cmd/rls")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the service:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// requireEnv returns an environment variable naming a file; when it is missing the test fails
// under RLS_REQUIRE=1 (make test-rls) and is skipped otherwise.
func requireEnv(t testing.TB, name, def string) string {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		v = def
	}
	if v != "" {
		if _, err := os.Stat(v); err == nil || !strings.Contains(v, "/") {
			return v
		}
	}
	if os.Getenv("RLS_REQUIRE") == "1" {
		t.Fatalf("%s is not set or does not exist (%q)", name, v)
	}
	t.Skipf("%s is not set (run make test-rls)", name)
	return ""
}

type proc struct {
	cmd  *exec.Cmd
	out  *bytes.Buffer
	done chan struct{}
}

func start(t testing.TB, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(name, args...), out: &bytes.Buffer{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() { p.stop() })
	return p
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Redis is a redis-server with the module, on a free loopback port.
type Redis struct {
	Port   int
	Client *redis.Client
	proc   *proc
}

func startRedis(t testing.TB) *Redis {
	t.Helper()
	server := requireEnv(t, "RL_SERVER", "redis-server")
	module := requireEnv(t, "RL_MODULE", "")
	port := freePort(t)
	p := start(t, server, nil, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--loadmodule", module)
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), Protocol: 2})
	t.Cleanup(func() { _ = c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("redis-server did not start: %s", p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return &Redis{Port: port, Client: c, proc: p}
}

// configDir lays out RUNTIME_ROOT/ratelimit/config with the given files (name -> content).
func configDir(t testing.TB, files map[string]string) (root, dir string) {
	t.Helper()
	root = t.TempDir()
	dir = filepath.Join(root, "ratelimit", "config")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root, dir
}

func readmeExamples(t testing.TB) map[string]string {
	t.Helper()
	out := map[string]string{}
	paths, _ := filepath.Glob("testdata/readme/*.yaml")
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		out[filepath.Base(p)] = string(b)
	}
	if len(out) == 0 {
		t.Fatal("no README examples in testdata/readme")
	}
	return out
}

// Service is one running rate limit service.
type Service struct {
	Name     string
	GRPC     pb.RateLimitServiceClient
	HTTPPort int
	proc     *proc
}

func (s *Service) Logs() string { return s.proc.out.String() }

func waitHealthy(t testing.TB, name string, p *proc, httpPort int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/healthcheck", httpPort))
		if err == nil {
			_, _ = io.Copy(io.Discard, r.Body)
			r.Body.Close()
			if r.StatusCode == 200 {
				return
			}
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited: %s", name, p.out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not healthy: %s", name, p.out.String())
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func dial(t testing.TB, port int) pb.RateLimitServiceClient {
	t.Helper()
	conn, err := grpc.NewClient(fmt.Sprintf("127.0.0.1:%d", port), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewRateLimitServiceClient(conn)
}

// startOurs runs this service on r with the configuration under root.
func startOurs(t testing.TB, r *Redis, root string, env ...string) *Service {
	t.Helper()
	gp, hp := freePort(t), freePort(t)
	base := []string{
		"REDIS_URL=" + fmt.Sprintf("127.0.0.1:%d", r.Port), "REDIS_TYPE=single", "REDIS_SOCKET_TYPE=tcp",
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_POLL_INTERVAL=200ms",
		"GRPC_HOST=127.0.0.1", "HOST=127.0.0.1", fmt.Sprintf("GRPC_PORT=%d", gp), fmt.Sprintf("HTTP_PORT=%d", hp),
		"CACHE_KEY_PREFIX=rls:", "LOG_LEVEL=warn",
	}
	var p *proc
	t.Cleanup(func() { // runs after the process stopped
		if p != nil && strings.Contains(p.out.String(), "DATA RACE") {
			t.Errorf("the service reported a data race:\n%s", p.out.String())
		}
	})
	p = start(t, ourBinary, append(base, env...))
	waitHealthy(t, "rls", p, hp)
	return &Service{Name: "rls", GRPC: dial(t, gp), HTTPPort: hp, proc: p}
}

// startUpstream runs envoyproxy/ratelimit on r with the same configuration.
func startUpstream(t testing.TB, r *Redis, root string, env ...string) *Service {
	t.Helper()
	bin := requireEnv(t, "RLS_UPSTREAM", "")
	gp, hp, dp := freePort(t), freePort(t), freePort(t)
	base := []string{
		"REDIS_URL=" + fmt.Sprintf("127.0.0.1:%d", r.Port), "REDIS_TYPE=SINGLE", "REDIS_SOCKET_TYPE=tcp",
		"RUNTIME_ROOT=" + root, "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"GRPC_HOST=127.0.0.1", "HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		fmt.Sprintf("GRPC_PORT=%d", gp), fmt.Sprintf("PORT=%d", hp), fmt.Sprintf("DEBUG_PORT=%d", dp),
		"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_POOL_SIZE=10",
	}
	p := start(t, bin, append(base, env...))
	waitHealthy(t, "envoyproxy/ratelimit", p, hp)
	return &Service{Name: "envoyproxy/ratelimit", GRPC: dial(t, gp), HTTPPort: hp, proc: p}
}

// D builds a descriptor from key, value pairs.
func D(kv ...string) *pbext.RateLimitDescriptor {
	d := &pbext.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &pbext.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func call(t testing.TB, s *Service, domain string, ds ...*pbext.RateLimitDescriptor) *pb.RateLimitResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := s.GRPC.ShouldRateLimit(ctx, &pb.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatalf("%s: ShouldRateLimit(%s): %v", s.Name, domain, err)
	}
	return r
}

func metrics(t testing.TB, s *Service) string {
	t.Helper()
	r, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", s.HTTPPort))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// startOfSecond waits until the wall clock is early in a second, so a short burst of calls to
// both services falls in one per-second window.
func startOfSecond() {
	ms := time.Now().UnixMilli() % 1000
	if ms > 50 {
		time.Sleep(time.Duration(1010-ms) * time.Millisecond)
	}
}

func numCPU() int { return runtime.NumCPU() }
