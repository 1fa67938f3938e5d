// Command rls is a rate limit service for Envoy (envoy.service.ratelimit.v3.RateLimitService)
// that reads envoyproxy/ratelimit's configuration and environment and counts in Redis with the
// redis-ratelimit module: one RL.ALL per request, all or nothing.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/config"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/server"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/service"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/stats"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/store"
	"github.com/redis-ratelimit/redis-ratelimit/rls/internal/xds"
)

func env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

func envBool(name string, def bool) bool {
	v, err := strconv.ParseBool(env(name, strconv.FormatBool(def)))
	if err != nil {
		fatal("invalid boolean", "variable", name, "value", os.Getenv(name))
	}
	return v
}

func envInt(name string, def int) int {
	v, err := strconv.Atoi(env(name, strconv.Itoa(def)))
	if err != nil {
		fatal("invalid integer", "variable", name, "value", os.Getenv(name))
	}
	return v
}

func envDuration(name string, def time.Duration) time.Duration {
	v, err := time.ParseDuration(env(name, def.String()))
	if err != nil || v <= 0 {
		fatal("invalid duration", "variable", name, "value", os.Getenv(name))
	}
	return v
}

func fatal(msg string, args ...any) {
	slog.Error(msg, args...)
	os.Exit(1)
}

func logger() *slog.Logger {
	level := slog.LevelWarn
	switch strings.ToLower(env("LOG_LEVEL", "warn")) {
	case "trace", "debug":
		level = slog.LevelDebug
	case "info":
		level = slog.LevelInfo
	case "error", "fatal", "panic":
		level = slog.LevelError
	}
	o := &slog.HandlerOptions{Level: level}
	if strings.EqualFold(env("LOG_FORMAT", "text"), "json") {
		return slog.New(slog.NewJSONHandler(os.Stderr, o))
	}
	return slog.New(slog.NewTextHandler(os.Stderr, o))
}

func tlsConfig() *tls.Config {
	if !envBool("REDIS_TLS", false) {
		return nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: envBool("REDIS_TLS_SKIP_HOSTNAME_VERIFICATION", false)}
	if ca := env("REDIS_TLS_CACERT", ""); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			fatal("cannot read REDIS_TLS_CACERT", "error", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			fatal("no certificate in REDIS_TLS_CACERT")
		}
		c.RootCAs = pool
	}
	if cert := env("REDIS_TLS_CLIENT_CERT", ""); cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, env("REDIS_TLS_CLIENT_KEY", ""))
		if err != nil {
			fatal("cannot load REDIS_TLS_CLIENT_CERT/REDIS_TLS_CLIENT_KEY", "error", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	return c
}

// redisClient reads envoyproxy/ratelimit's Redis variables: REDIS_TYPE (single, cluster,
// sentinel), REDIS_URL (host:port; for cluster a comma-separated list of nodes; for sentinel
// "master,sentinel1:port,..."), REDIS_SOCKET_TYPE (tcp or unix), REDIS_AUTH ("password" or
// "user:password"), REDIS_SENTINEL_AUTH, REDIS_TLS*, REDIS_POOL_SIZE, REDIS_TIMEOUT.
func redisClient(timeout time.Duration) (redis.UniversalClient, bool) {
	typ := strings.ToLower(env("REDIS_TYPE", "single"))
	url := env("REDIS_URL", "127.0.0.1:6379")
	user, pass := "", env("REDIS_AUTH", "")
	if i := strings.Index(pass, ":"); i >= 0 {
		user, pass = pass[:i], pass[i+1:]
	}
	o := &redis.UniversalOptions{
		Username: user, Password: pass, PoolSize: envInt("REDIS_POOL_SIZE", 10),
		DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
		TLSConfig: tlsConfig(), Protocol: 2, DisableIdentity: true,
		MaxRetries: -1, ContextTimeoutEnabled: true,
	}
	if strings.HasPrefix(url, "redis://") || strings.HasPrefix(url, "rediss://") {
		po, err := redis.ParseURL(url)
		if err != nil {
			fatal("invalid REDIS_URL", "error", err)
		}
		url = po.Addr
		if o.Password == "" {
			o.Username, o.Password = po.Username, po.Password
		}
		if po.TLSConfig != nil && o.TLSConfig == nil {
			o.TLSConfig = po.TLSConfig
		}
		o.DB = po.DB
	}
	switch typ {
	case "single", "":
		o.Addrs = []string{url}
		if strings.HasPrefix(url, "/") { // a socket path (REDIS_SOCKET_TYPE=unix)
			c := redis.NewClient(&redis.Options{Network: "unix", Addr: url, Username: o.Username, Password: o.Password,
				PoolSize: o.PoolSize, DialTimeout: timeout, ReadTimeout: timeout, WriteTimeout: timeout,
				TLSConfig: o.TLSConfig, Protocol: 2, DisableIdentity: true, MaxRetries: -1, ContextTimeoutEnabled: true})
			return c, false
		}
		return redis.NewClient(o.Simple()), false
	case "cluster":
		o.Addrs = strings.Split(url, ",")
		o.MaxRedirects = 3
		return redis.NewClusterClient(o.Cluster()), true
	case "sentinel":
		parts := strings.Split(url, ",")
		if len(parts) < 2 {
			fatal("REDIS_URL for sentinel is master_name,host:port[,host:port...]")
		}
		o.MasterName, o.Addrs = parts[0], parts[1:]
		o.SentinelPassword = env("REDIS_SENTINEL_AUTH", "")
		return redis.NewFailoverClient(o.Failover()), false
	}
	fatal("REDIS_TYPE must be single, cluster or sentinel", "value", typ)
	return nil, false
}

func main() {
	log := logger()
	slog.SetDefault(log)
	if bt := strings.ToLower(env("BACKEND_TYPE", "redis")); bt != "redis" && bt != "redis_module" {
		fatal("BACKEND_TYPE must be redis (this service counts with the redis-ratelimit module)", "value", bt)
	}
	timeout := envDuration("REDIS_TIMEOUT", time.Second)
	client, cluster := redisClient(timeout)
	st := store.New(client, cluster, envDuration("RL_HOLD_TTL", 10*time.Second))
	if envBool("REDIS_GROUP_BY_SLOT", false) {
		// One RL.ALL per hash slot even on a standalone server: the Redis Cluster path, for tests.
		st.SetBySlot(true)
	}
	reg := stats.New(envInt("STATS_MAX_SERIES", 10000))
	failure := service.FailError
	switch strings.ToLower(env("FAILURE_MODE", "error")) {
	case "error":
	case "open", "allow":
		failure = service.FailOpen
	case "closed", "deny":
		failure = service.FailClosed
	default:
		fatal("FAILURE_MODE must be error, open or closed", "value", os.Getenv("FAILURE_MODE"))
	}
	ratio, err := strconv.ParseFloat(env("NEAR_LIMIT_RATIO", "0.8"), 64)
	if err != nil || ratio <= 0 || ratio > 1 {
		fatal("NEAR_LIMIT_RATIO must be in (0, 1]", "value", os.Getenv("NEAR_LIMIT_RATIO"))
	}
	var headers *[3]string
	if envBool("LIMIT_RESPONSE_HEADERS_ENABLED", false) {
		headers = &[3]string{env("LIMIT_LIMIT_HEADER", "RateLimit-Limit"), env("LIMIT_REMAINING_HEADER", "RateLimit-Remaining"),
			env("LIMIT_RESET_HEADER", "RateLimit-Reset")}
	}
	svc := service.New(st, reg, service.Options{
		Headers:   headers,
		KeyPrefix: env("CACHE_KEY_PREFIX", ""), HashTag: strings.EqualFold(env("REDIS_KEY_HASH_TAG", ""), "domain"),
		NearLimitRatio: ratio, GlobalShadow: envBool("SHADOW_MODE", false), Timeout: timeout,
		Failure: failure, Log: log,
	})
	hc := &server.Health{}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	apply := func(c *config.Config) {
		svc.SetConfig(c)
		hc.SetReady()
		reg.ConfigLoadSuccess.Add(1)
		log.Info("configuration loaded", "domains", c.Domains())
	}
	fail := func(err error) {
		reg.ConfigLoadError.Add(1)
		log.Error("configuration not loaded; the previous one stays", "error", err)
	}
	force := envBool("FORCE_START_WITHOUT_INITIAL_CONFIG", false)
	if force && !envBool("HEALTHY_WITH_AT_LEAST_ONE_CONFIG_LOADED", false) {
		hc.SetReady()
	}
	source := ""
	switch strings.ToUpper(env("CONFIG_TYPE", "FILE")) {
	case "FILE":
		dir := config.Dir(env("RUNTIME_ROOT", "/srv/runtime_data/current"), env("RUNTIME_SUBDIRECTORY", ""), env("RUNTIME_APPDIRECTORY", "config"))
		source = dir
		config.Watch(ctx, dir, envBool("RUNTIME_IGNOREDOTFILES", false), envBool("MERGE_DOMAIN_CONFIG", false),
			envDuration("RUNTIME_POLL_INTERVAL", time.Second), apply, fail)
		if svc.Config() == nil && !force {
			fatal("no configuration could be loaded", "dir", dir)
		}
	case "GRPC_XDS_SOTW":
		source = "xds://" + env("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000")
		conn, err := grpc.NewClient(env("CONFIG_GRPC_XDS_SERVER_URL", "localhost:18000"), grpc.WithTransportCredentials(xdsCredentials()))
		if err != nil {
			fatal("CONFIG_GRPC_XDS_SERVER_URL", "error", err)
		}
		first := make(chan struct{})
		var once sync.Once
		go xds.Watch(ctx, conn, xds.Options{
			NodeID: env("CONFIG_GRPC_XDS_NODE_ID", "default"), Merge: envBool("MERGE_DOMAIN_CONFIG", false),
			Retry: envDuration("CONFIG_GRPC_XDS_SERVER_CONNECT_RETRY_INTERVAL", 3*time.Second), Log: log,
		}, func(c *config.Config) { apply(c); once.Do(func() { close(first) }) }, fail)
		if !force {
			log.Info("waiting for the first configuration from the xDS server", "server", source)
			select {
			case <-first:
			case <-ctx.Done():
				return
			}
		}
	default:
		fatal("CONFIG_TYPE must be FILE or GRPC_XDS_SOTW", "value", os.Getenv("CONFIG_TYPE"))
	}

	grpcAddr := net.JoinHostPort(env("GRPC_HOST", "0.0.0.0"), env("GRPC_PORT", "8081"))
	httpAddr := net.JoinHostPort(env("HOST", "0.0.0.0"), env("HTTP_PORT", env("PORT", "8080")))
	gl, err := net.Listen("tcp", grpcAddr)
	if err != nil {
		fatal("cannot listen", "address", grpcAddr, "error", err)
	}
	hl, err := net.Listen("tcp", httpAddr)
	if err != nil {
		fatal("cannot listen", "address", httpAddr, "error", err)
	}
	gs := grpc.NewServer(grpcServerOptions()...)
	pb.RegisterRateLimitServiceServer(gs, svc)
	gh := health.NewServer()
	healthpb.RegisterHealthServer(gs, gh)
	hs := &http.Server{Handler: server.Handler(svc, hc, reg), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := gs.Serve(gl); err != nil {
			fatal("grpc server", "error", err)
		}
	}()
	go func() {
		if err := hs.Serve(hl); err != nil && !errors.Is(err, http.ErrServerClosed) {
			fatal("http server", "error", err)
		}
	}()
	if envBool("REDIS_HEALTH_CHECK_ACTIVE_CONNECTION", false) {
		// /healthcheck fails while Redis does not answer a PING (checked every second).
		go func() {
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for {
				pctx, cancel := context.WithTimeout(ctx, timeout)
				err := st.Ping(pctx)
				cancel()
				hc.SetRedisDown(err != nil)
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
			}
		}()
	}
	if envBool("USE_PROMETHEUS", false) {
		// envoyproxy/ratelimit's separate Prometheus listener; /metrics on the HTTP port stays.
		mux := http.NewServeMux()
		mux.HandleFunc(env("PROMETHEUS_PATH", "/metrics"), func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "text/plain; version=0.0.4")
			reg.Write(w)
		})
		ps := &http.Server{Addr: env("PROMETHEUS_ADDR", ":9090"), Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() {
			if err := ps.ListenAndServe(); err != nil && !errors.Is(err, http.ErrServerClosed) {
				log.Error("prometheus listener", "error", err)
			}
		}()
	}
	if envBool("USE_STATSD", false) {
		addr := net.JoinHostPort(env("STATSD_HOST", "localhost"), env("STATSD_PORT", "8125"))
		conn, err := net.Dial("udp", addr)
		if err != nil {
			fatal("statsd", "address", addr, "error", err)
		}
		sd := stats.NewStatsd(reg, conn)
		every := envDuration("STATS_FLUSH_INTERVAL", 10*time.Second)
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					sd.Flush()
					return
				case <-t.C:
					sd.Flush()
				}
			}
		}()
	}
	fmt.Fprintf(os.Stderr, "rls: grpc on %s, http on %s, config from %s\n", gl.Addr(), hl.Addr(), source)
	<-ctx.Done()

	// Graceful shutdown: fail health checks, finish requests in flight (bounded), then close.
	log.Warn("shutting down")
	hc.Stop()
	gh.Shutdown()
	grace := envDuration("SHUTDOWN_GRACE", 10*time.Second)
	done := make(chan struct{})
	go func() { gs.GracefulStop(); close(done) }()
	select {
	case <-done:
	case <-time.After(grace):
		gs.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = hs.Shutdown(sctx)
	_ = st.Close()
}

func certPool(name, file string) *x509.CertPool {
	pem, err := os.ReadFile(file)
	if err != nil {
		fatal("cannot read "+name, "error", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		fatal("no certificate in " + name)
	}
	return pool
}

// grpcServerOptions: GRPC_SERVER_USE_TLS with GRPC_SERVER_TLS_CERT/KEY; a CA in
// GRPC_SERVER_TLS_CA_CERT (or GRPC_CLIENT_TLS_CACERT) requires client certificates signed by it.
func grpcServerOptions() []grpc.ServerOption {
	if !envBool("GRPC_SERVER_USE_TLS", false) {
		return nil
	}
	kp, err := tls.LoadX509KeyPair(env("GRPC_SERVER_TLS_CERT", ""), env("GRPC_SERVER_TLS_KEY", ""))
	if err != nil {
		fatal("cannot load GRPC_SERVER_TLS_CERT/GRPC_SERVER_TLS_KEY", "error", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{kp}}
	if ca := env("GRPC_SERVER_TLS_CA_CERT", env("GRPC_CLIENT_TLS_CACERT", "")); ca != "" {
		c.ClientCAs = certPool("GRPC_SERVER_TLS_CA_CERT", ca)
		c.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(c))}
}

// xdsCredentials: CONFIG_GRPC_XDS_SERVER_USE_TLS with CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY and
// CONFIG_GRPC_XDS_SERVER_TLS_CACERT (and CONFIG_GRPC_XDS_SERVER_TLS_SAN).
func xdsCredentials() credentials.TransportCredentials {
	if !envBool("CONFIG_GRPC_XDS_SERVER_USE_TLS", false) {
		return insecure.NewCredentials()
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: env("CONFIG_GRPC_XDS_SERVER_TLS_SAN", "")}
	if cert := env("CONFIG_GRPC_XDS_CLIENT_TLS_CERT", ""); cert != "" {
		kp, err := tls.LoadX509KeyPair(cert, env("CONFIG_GRPC_XDS_CLIENT_TLS_KEY", ""))
		if err != nil {
			fatal("cannot load CONFIG_GRPC_XDS_CLIENT_TLS_CERT/KEY", "error", err)
		}
		c.Certificates = []tls.Certificate{kp}
	}
	if ca := env("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ""); ca != "" {
		c.RootCAs = certPool("CONFIG_GRPC_XDS_SERVER_TLS_CACERT", ca)
	}
	return credentials.NewTLS(c)
}
