package test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterPorts finds n ports whose cluster bus ports (+10000) are free too.
func clusterPorts(t *testing.T, n int) []int {
	t.Helper()
	out := []int{}
	for p := 20000 + os.Getpid()%20000; len(out) < n && p < 45000; p += 7 {
		ok := true
		for _, q := range []int{p, p + 10000} {
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			out = append(out, p)
		}
	}
	if len(out) < n {
		t.Fatal("no free ports for a cluster")
	}
	return out
}

// startCluster runs a Redis Cluster of three masters with the module on every node.
func startCluster(t *testing.T) []string {
	t.Helper()
	server := requireEnv(t, "RL_SERVER", "redis-server")
	module := requireEnv(t, "RL_MODULE", "")
	cli := "redis-cli"
	if _, err := exec.LookPath(cli); err != nil {
		t.Fatalf("redis-cli is needed to create the cluster: %v", err)
	}
	addrs := []string{}
	for _, p := range clusterPorts(t, 3) {
		dir := t.TempDir()
		start(t, server, nil, "--port", fmt.Sprint(p), "--bind", "127.0.0.1", "--dir", dir,
			"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "2000",
			"--save", "", "--appendonly", "no", "--loadmodule", module)
		addrs = append(addrs, fmt.Sprintf("127.0.0.1:%d", p))
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		deadline := time.Now().Add(10 * time.Second)
		for c.Ping(context.Background()).Err() != nil {
			if time.Now().After(deadline) {
				t.Fatalf("node %s did not start", a)
			}
			time.Sleep(20 * time.Millisecond)
		}
		c.Close()
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.Command(cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		for {
			info, _ := c.ClusterInfo(context.Background()).Result()
			if strings.Contains(info, "cluster_state:ok") && strings.Contains(info, "cluster_slots_ok:16384") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster not ok: %s", info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		c.Close()
	}
	return addrs
}

// TestRedisCluster: REDIS_TYPE=cluster on a three-master Cluster. The narrow and broad keys of
// README example 2 live on different masters; a denial by the narrow one leaves the broad one
// uncharged (HOLD, then RL.SETTLE 0), and granted requests stay charged (RL.SETTLE).
func TestRedisCluster(t *testing.T) {
	addrs := startCluster(t)
	root, _ := configDir(t, readmeExamples(t))
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
	defer cc.Close()
	narrowKey := "rls:messaging_message_type_marketing_to_number_2061111111_fixed"
	broadKey := "rls:messaging_to_number_2061111111_fixed"
	owner := func(key string) string {
		a, _ := cc.MasterForKey(context.Background(), key)
		if a == nil {
			return ""
		}
		return a.Options().Addr
	}
	if owner(narrowKey) == owner(broadKey) {
		t.Fatalf("both keys on %s; the test needs two masters", owner(narrowKey))
	}
	gp, hp := freePort(t), freePort(t)
	p := start(t, ourBinary, []string{
		"REDIS_URL=" + strings.Join(addrs, ","), "REDIS_TYPE=cluster", "RUNTIME_ROOT=" + root,
		"RUNTIME_SUBDIRECTORY=ratelimit", "GRPC_HOST=127.0.0.1", "HOST=127.0.0.1",
		fmt.Sprintf("GRPC_PORT=%d", gp), fmt.Sprintf("HTTP_PORT=%d", hp), "CACHE_KEY_PREFIX=rls:", "RL_HOLD_TTL=300ms",
	})
	waitHealthy(t, "rls", p, hp)
	ours := &Service{Name: "rls", GRPC: dial(t, gp), HTTPPort: hp, proc: p}
	narrow := D("message_type", "marketing", "to_number", "2061111111")
	broad := D("to_number", "2061111111")
	for i := 0; i < 8; i++ {
		got := codesOf(call(t, ours, "messaging", narrow, broad))
		if i < 5 && got != "OK OK OK" || i >= 5 && got != "OVER_LIMIT OVER_LIMIT OK" {
			t.Fatalf("call %d: %s", i, got)
		}
	}
	time.Sleep(500 * time.Millisecond)
	if got := call(t, ours, "messaging", broad).Statuses[0].LimitRemaining; got != 94 {
		t.Fatalf("broad limit in the cluster: remaining %d, want 94", got)
	}
	info, err := cc.Do(context.Background(), "RL.INFO", broadKey).Result()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("broad key on %s, narrow key on %s; RL.INFO %s: %v", owner(broadKey), owner(narrowKey), broadKey, info)
}
