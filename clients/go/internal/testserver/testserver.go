// Package testserver starts real redis-server processes with the module loaded, on free
// loopback ports, for the tests: RL_MODULE names the module (default: the repository's debug
// build, target/debug/libredis_ratelimit.so), RL_SERVER the server binary (default
// redis-server), RL_LD_LIBRARY_PATH its library path.
package testserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Module is the module's path: RL_MODULE, else the repository's debug build.
func Module() string {
	if m := os.Getenv("RL_MODULE"); m != "" {
		abs, _ := filepath.Abs(m)
		return abs
	}
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "..", "target", "debug", "libredis_ratelimit.so")
}

// ServerBin is RL_SERVER, else redis-server.
func ServerBin() string {
	if s := os.Getenv("RL_SERVER"); s != "" {
		return s
	}
	return "redis-server"
}

// Server is one running redis-server.
type Server struct {
	Addr string
	Port int
	cmd  *exec.Cmd
	dir  string
	log  *bytes.Buffer
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func start(module string, port int, extra ...string) (*Server, error) {
	dir, err := os.MkdirTemp("", "rl-go-server-")
	if err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--enable-debug-command", "yes", "--protected-mode", "no"}
	if module != "" {
		args = append(args, "--loadmodule", module)
	}
	args = append(args, extra...)
	cmd := exec.Command(ServerBin(), args...)
	if lib := os.Getenv("RL_LD_LIBRARY_PATH"); lib != "" {
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+lib)
	}
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", ServerBin(), err)
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Port: port, cmd: cmd, dir: dir, log: &log}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: 2, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("%s exited: %s", ServerBin(), log.String())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return s, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.Stop()
	return nil, fmt.Errorf("%s did not answer on %s: %s", ServerBin(), s.Addr, log.String())
}

// Start starts a server with the module (module "" for none) on a free port, stopped when the
// test ends.
func Start(t testing.TB, module string, extra ...string) *Server {
	t.Helper()
	if module != "" {
		if _, err := os.Stat(module); err != nil {
			t.Fatalf("no module at %s (build it with `make build`, or set RL_MODULE): %v", module, err)
		}
	}
	var lastErr error
	for i := 0; i < 5; i++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		s, err := start(module, port, extra...)
		if err == nil {
			t.Cleanup(s.Stop)
			return s
		}
		lastErr = err
	}
	t.Fatalf("could not start a server: %v", lastErr)
	return nil
}

// Stop stops the server by its pid and removes its directory.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Kill()
	}
	os.RemoveAll(s.dir)
}

// Client is a go-redis client on s with the given protocol (2 or 3).
func (s *Server) Client(t testing.TB, protocol int) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr, Protocol: protocol})
	t.Cleanup(func() { rdb.Close() })
	return rdb
}

// Cluster is a local Redis Cluster of 3 masters and 3 replicas, the module on every node.
type Cluster struct {
	Addrs   []string
	servers []*Server
}

// StartCluster starts a 3+3 cluster on free ports (redis-cli --cluster create), stopped when the
// test ends.
func StartCluster(t testing.TB, module string) *Cluster {
	t.Helper()
	c := &Cluster{}
	t.Cleanup(c.Stop)
	for i := 0; i < 6; i++ {
		var s *Server
		var err error
		for try := 0; try < 5; try++ {
			var port int
			// The cluster bus uses port+10000: keep below 55536.
			for port == 0 || port+10000 > 65535 {
				if port, err = freePort(); err != nil {
					t.Fatal(err)
				}
			}
			s, err = start(module, port, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000", "--repl-diskless-sync-delay", "0")
			if err == nil {
				break
			}
		}
		if err != nil {
			t.Fatalf("cluster node: %v", err)
		}
		c.servers = append(c.servers, s)
		c.Addrs = append(c.Addrs, s.Addr)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs...)
	args = append(args, "--cluster-replicas", "1", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ok := 0
		for _, a := range c.Addrs {
			rdb := redis.NewClient(&redis.Options{Addr: a, Protocol: 2})
			info, _ := rdb.ClusterInfo(context.Background()).Result()
			repl, _ := rdb.Info(context.Background(), "replication").Result()
			rdb.Close()
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") &&
				(strings.Contains(repl, "role:master") || strings.Contains(repl, "master_link_status:up")) {
				ok++
			}
		}
		if ok == len(c.Addrs) {
			return c
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster not ok after 60s (%d of %d nodes)", ok, len(c.Addrs))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop stops every node by its pid.
func (c *Cluster) Stop() {
	for _, s := range c.servers {
		s.Stop()
	}
	c.servers = nil
}

// StartMain starts a server with the module for a whole test binary (TestMain, examples); the
// caller stops it.
func StartMain() (*Server, error) {
	var lastErr error
	for i := 0; i < 5; i++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := start(Module(), port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

// StartSentinel starts a Redis Sentinel (redis-server --sentinel) on a free port monitoring the
// master at masterAddr as "mymaster", stopped when the test ends; it returns its address once
// it knows the master.
func StartSentinel(t testing.TB, masterAddr string) string {
	t.Helper()
	host, mport, _ := net.SplitHostPort(masterAddr)
	for try := 0; try < 5; try++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor mymaster %s %s 1\n"+
			"sentinel down-after-milliseconds mymaster 5000\n", port, dir, host, mport)
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(ServerBin(), conf, "--sentinel")
		var log bytes.Buffer
		cmd.Stdout, cmd.Stderr = &log, &log
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		sc := redis.NewSentinelClient(&redis.Options{Addr: addr})
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			if a, err := sc.GetMasterAddrByName(context.Background(), "mymaster").Result(); err == nil && len(a) == 2 {
				sc.Close()
				return addr
			}
			time.Sleep(50 * time.Millisecond)
		}
		sc.Close()
		_ = cmd.Process.Kill()
		t.Logf("sentinel on %s did not start: %s", addr, log.String())
	}
	t.Fatal("could not start a sentinel")
	return ""
}
