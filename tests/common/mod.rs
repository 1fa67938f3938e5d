//! Integration-test harness: builds the module once, starts real `redis-server` processes on free
//! loopback ports in temp dirs, and talks RESP2/RESP3 to them over TCP.
//!
//! Use from a test file with `mod common; use common::*;`.
//!
//! Environment:
//! - `RL_MODULE`: path of the module `.so` (default: `cargo build --lib`, then `target/debug`).
//! - `RL_SERVER`: server binary (default `redis-server` from `PATH`).
//! - `RL_MODULE_ARGS`: module arguments, split on whitespace, appended after the module path.
//! - `RL_LD_LIBRARY_PATH`: `LD_LIBRARY_PATH` for the server (Redis 7.4 needs OpenSSL 1.1 libs).
//!
//! Every `Server` owns its process: dropping it sends `SHUTDOWN NOSAVE`, and kills the process if
//! it has not exited after 5 s. A server that crashed (a bug report in its log) fails the test
//! on drop. Timeouts are deadlines, so a hung server fails a test instead of hanging it. A
//! failing test keeps the server's dir and prints the end of its log.
#![allow(dead_code)]

use std::fs::{self, OpenOptions};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How long a server may take to answer `PING` after it was spawned.
const START_DEADLINE: Duration = Duration::from_secs(10);
/// How long a server may take to exit after `SHUTDOWN`.
const STOP_DEADLINE: Duration = Duration::from_secs(5);
/// Read timeout of a [`Conn`]: a reply slower than this fails the test.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a replica may take to link up or catch up: a full sync on a loaded 2-core machine
/// (four test servers at a time) has taken over 10 s.
const REPLICATION_DEADLINE: Duration = Duration::from_secs(30);
/// Attempts at starting a server when another process took the free port first.
const START_ATTEMPTS: usize = 5;
/// Log lines printed when a test panics while a server is up.
const LOG_TAIL_LINES: usize = 50;

// ---------------------------------------------------------------------------------------------
// Module and server binary
// ---------------------------------------------------------------------------------------------

/// Path of the module under test: `$RL_MODULE`, or the debug build, built once per test binary.
///
/// # Panics
/// If `cargo build --lib` fails or the `.so` is missing afterwards.
pub fn module_path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(p) = std::env::var_os("RL_MODULE").filter(|p| !p.is_empty()) {
            let p = PathBuf::from(p);
            assert!(
                p.is_file(),
                "RL_MODULE={} does not exist; run `make build` or unset RL_MODULE",
                p.display()
            );
            return p;
        }
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
        let status = Command::new(env!("CARGO"))
            .args(["build", "--lib", "--quiet"])
            .current_dir(manifest)
            .status()
            .unwrap_or_else(|e| panic!("cannot run `cargo build --lib`: {e}"));
        assert!(
            status.success(),
            "`cargo build --lib` failed ({status}); see `make build`"
        );
        let target = match std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
            Some(d) => manifest.join(d), // join keeps an absolute path as it is
            None => manifest.join("target"),
        };
        let so = target.join("debug").join("libredis_ratelimit.so");
        assert!(
            so.is_file(),
            "module not found at {} after `cargo build --lib`; run `make build`",
            so.display()
        );
        so
    })
    .clone()
}

/// The server binary: `$RL_SERVER`, or `redis-server` from `PATH`.
pub fn server_bin() -> String {
    std::env::var("RL_SERVER")
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "redis-server".to_string())
}

/// Module configs every test server gets unless the test sets them: tests drive time with `AT`
/// an hour or more ahead of the clock (`base_ms`), which the default `ratelimit.at-max-ahead`
/// (1000 ms) refuses, and step back from it by hours, which the default
/// `ratelimit.at-max-behind` (60000 ms) refuses once the real clock has passed those times.
pub const TEST_MODULE_ARGS: &[&str] = &["at-max-ahead", "-1", "at-max-behind", "-1"];

fn module_args() -> Vec<String> {
    std::env::var("RL_MODULE_ARGS")
        .map(|s| s.split_whitespace().map(str::to_string).collect())
        .unwrap_or_default()
}

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 for a free port");
    listener
        .local_addr()
        .expect("local_addr of a bound listener")
        .port()
}

fn port_is_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

fn new_temp_dir() -> PathBuf {
    static COUNTER: AtomicUsize = AtomicUsize::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("rl-test-{}-{n}", std::process::id()));
    // A leftover from an earlier run with the same pid would mix old data into this test.
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    dir
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

// ---------------------------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------------------------

/// A `redis-server` child process with the module loaded, on `127.0.0.1:port`, data in `dir`.
pub struct Server {
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// Working directory (`--dir`): RDB/AOF files and `server.log`.
    pub dir: PathBuf,
    child: Option<Child>,
    bin: String,
    extra: Vec<String>,
    /// Arguments after the module path: `RL_MODULE_ARGS`, or those of `start_with_module_args`.
    module_args: Vec<String>,
    /// Remove `dir` on drop (false for [`Server::start_in`], whose dir belongs to the caller).
    owns_dir: bool,
    /// The log was already printed in a panic message; don't print it again on drop.
    log_shown: bool,
}

impl Server {
    /// Start a server with the default arguments.
    pub fn start() -> Server {
        Server::start_with(&[])
    }

    /// Start a server with extra arguments, e.g. `&["--appendonly", "yes"]`. They come after the
    /// defaults, so they override them.
    pub fn start_with(extra: &[&str]) -> Server {
        Server::spawn(new_temp_dir(), true, extra, module_args())
    }

    /// Start a server whose module gets `module_args` (`--loadmodule <so> <module_args...>`,
    /// e.g. `&["dedup-max", "7"]`) instead of `RL_MODULE_ARGS`. Use this rather than setting
    /// the environment variable, which would leak into servers of tests running in parallel.
    pub fn start_with_module_args(extra: &[&str], module_args: &[&str]) -> Server {
        let module_args = module_args.iter().map(|s| s.to_string()).collect();
        Server::spawn(new_temp_dir(), true, extra, module_args)
    }

    /// Start a server whose module gets exactly `module_args`, without the test defaults of
    /// [`TEST_MODULE_ARGS`] (to test the module's own defaults).
    pub fn start_with_exact_module_args(extra: &[&str], module_args: &[&str]) -> Server {
        let mut server = Server {
            port: 0,
            dir: new_temp_dir(),
            child: None,
            bin: server_bin(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            module_args: module_args.iter().map(|s| s.to_string()).collect(),
            owns_dir: true,
            log_shown: false,
        };
        server.launch(None);
        server
    }

    /// Start a server on an existing dir (restart on the same data). The dir is not removed when
    /// this server is dropped; it belongs to whoever created it.
    pub fn start_in(dir: &Path, extra: &[&str]) -> Server {
        Server::spawn(dir.to_path_buf(), false, extra, module_args())
    }

    /// Start a replica of `master` and wait (30 s) until its link is up.
    pub fn replica_of(master: &Server) -> Server {
        Server::replica_of_with(master, &[])
    }

    /// [`Server::replica_of`] with extra server arguments.
    pub fn replica_of_with(master: &Server, extra: &[&str]) -> Server {
        let replica = Server::start_with(extra);
        let port = master.port.to_string();
        replica
            .conn()
            .ok(&["REPLICAOF", "127.0.0.1", port.as_str()]);
        let mut c = replica.conn();
        wait_until(
            &format!("replica {} linked to master {}", replica.port, master.port),
            REPLICATION_DEADLINE,
            || c.info_field("replication", "master_link_status").as_deref() == Some("up"),
        );
        replica
    }

    fn spawn(dir: PathBuf, owns_dir: bool, extra: &[&str], module_args: Vec<String>) -> Server {
        // Test defaults first, unless the caller sets the same config.
        let mut all: Vec<String> = Vec::new();
        for pair in TEST_MODULE_ARGS.chunks(2) {
            if !module_args.iter().any(|a| a.eq_ignore_ascii_case(pair[0])) {
                all.extend(pair.iter().map(|s| s.to_string()));
            }
        }
        all.extend(module_args);
        let module_args = all;
        let mut server = Server {
            port: 0,
            dir,
            child: None,
            bin: server_bin(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
            module_args,
            owns_dir,
            log_shown: false,
        };
        server.launch(None);
        server
    }

    /// Spawn the process and wait until it answers PING. `preferred` is tried first (restart).
    fn launch(&mut self, preferred: Option<u16>) {
        let module = module_path();
        let mut last_failure = String::new();
        for attempt in 0..START_ATTEMPTS {
            let port = match preferred {
                Some(p) if attempt == 0 && port_is_free(p) => p,
                _ => free_port(),
            };
            let log_offset = fs::metadata(self.log_path()).map(|m| m.len()).unwrap_or(0);
            let child = self.spawn_child(port, &module);
            self.port = port;
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return,
                Err(why) => {
                    self.kill_child();
                    let log = self.log();
                    let new_log = log.get(log_offset as usize..).unwrap_or(&log).to_string();
                    last_failure = format!(
                        "{} did not start on port {port}: {why}\n--- {} ---\n{}",
                        self.bin,
                        self.log_path().display(),
                        tail(&new_log, LOG_TAIL_LINES)
                    );
                    // Only a lost race for the port is worth another try.
                    if !new_log.contains("in use") && !why.starts_with(PORT_TAKEN) {
                        break;
                    }
                }
            }
        }
        self.log_shown = true;
        panic!("{last_failure}");
    }

    fn spawn_child(&self, port: u16, module: &Path) -> Child {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap_or_else(|e| panic!("open {}: {e}", self.log_path().display()));
        let log2 = log.try_clone().expect("clone log file handle");
        let port_s = port.to_string();
        let mut cmd = Command::new(&self.bin);
        cmd.args(["--port", &port_s, "--bind", "127.0.0.1"])
            .arg("--dir")
            .arg(&self.dir)
            .args([
                "--save",
                "",
                "--appendonly",
                "no",
                "--enable-debug-command",
                "yes",
            ])
            .args(["--repl-diskless-sync-delay", "0", "--logfile", "server.log"])
            .args(&self.extra)
            .arg("--loadmodule")
            .arg(module)
            .args(&self.module_args)
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            // Errors printed before the log file is opened (bad arguments, missing shared
            // libraries) land in the same file.
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log2));
        if let Some(ld) = std::env::var_os("RL_LD_LIBRARY_PATH").filter(|v| !v.is_empty()) {
            cmd.env("LD_LIBRARY_PATH", ld);
        }
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot run `{}` (set RL_SERVER?): {e}", self.bin))
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            let child = self.child.as_mut().expect("child just spawned");
            if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
                return Err(format!("process exited ({status})"));
            }
            let last = match ping(self.port) {
                // Make sure the PONG came from our process, not from another test's server that
                // took the port first (ours then fails to bind and exits).
                Ok(Reply::Simple(s)) if s == "PONG" => match server_pid(self.port) {
                    Some(pid) if pid == child.id() => return Ok(()),
                    pid => return Err(format!("{PORT_TAKEN} (pid {pid:?})")),
                },
                Ok(Reply::Error(e)) if e.starts_with("LOADING") => e,
                Ok(other) => return Err(format!("PING answered {other:?}")),
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                return Err(format!("no PONG within {START_DEADLINE:?} (last: {last})"));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// A new connection to this server.
    pub fn conn(&self) -> Conn {
        Conn::connect(self.port)
    }

    /// Path of the server log, `dir/server.log`.
    pub fn log_path(&self) -> PathBuf {
        self.dir.join("server.log")
    }

    /// Contents of the server log.
    pub fn log(&self) -> String {
        fs::read(self.log_path())
            .map(|b| String::from_utf8_lossy(&b).into_owned())
            .unwrap_or_default()
    }

    /// Process id of the running server, if any.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `SHUTDOWN` (saving as the configuration says), wait for the exit, then start again with
    /// the same dir and arguments, on the same port if it is still free.
    pub fn restart(&mut self) {
        self.shutdown(&["SHUTDOWN"]);
        let port = self.port;
        self.launch(Some(port));
    }

    /// `SHUTDOWN NOSAVE` and wait for the process to exit.
    pub fn kill_nosave(&mut self) {
        self.shutdown(&["SHUTDOWN", "NOSAVE"]);
    }

    /// Send a SHUTDOWN command and wait for the exit; panics if it does not exit in time.
    fn shutdown(&mut self, command: &[&str]) {
        if let Err(why) = self.try_shutdown(command) {
            self.kill_child();
            self.log_shown = true;
            panic!(
                "{} on port {} failed: {why}\n--- {} ---\n{}",
                command.join(" "),
                self.port,
                self.log_path().display(),
                tail(&self.log(), LOG_TAIL_LINES)
            );
        }
    }

    fn try_shutdown(&mut self, command: &[&str]) -> Result<(), String> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            self.child = None;
            return Ok(());
        }
        let deadline = Instant::now() + STOP_DEADLINE;
        if let Ok(mut c) = Conn::try_connect(self.port, Duration::from_secs(1)) {
            // Never panic here: this runs in Drop, maybe while a test is already panicking.
            let sent = c
                .reader
                .get_ref()
                .set_read_timeout(Some(STOP_DEADLINE))
                .is_ok()
                && c.try_send(command).is_ok();
            // On success the server closes the connection without a reply; a hung server
            // times out here and is killed below.
            match c.try_recv() {
                Ok(Reply::Error(e)) if sent => return Err(format!("server replied -{e}")),
                Ok(other) if sent => return Err(format!("server replied {other:?}")),
                _ => {}
            }
        }
        loop {
            if child.try_wait().map_err(|e| e.to_string())?.is_some() {
                self.child = None;
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("still running {STOP_DEADLINE:?} after the command"));
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill_child(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// True if the server's `INFO server` `redis_version` is at least `major.minor`.
    /// Valkey pegs `redis_version` at 7.2.4; see [`Server::is_valkey`].
    pub fn version_at_least(&self, major: u32, minor: u32) -> bool {
        let v = self
            .conn()
            .info_field("server", "redis_version")
            .expect("INFO redis_version");
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        let have = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        have >= (major, minor)
    }

    /// True for Valkey (its INFO has a `valkey_version` field).
    pub fn is_valkey(&self) -> bool {
        self.conn().info_field("server", "valkey_version").is_some()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.try_shutdown(&["SHUTDOWN", "NOSAVE"]).is_err() {
            self.kill_child();
        }
        if thread::panicking() {
            if self.log_shown {
                return;
            }
            eprintln!(
                "--- server on port {} failed a test; log {} (last {LOG_TAIL_LINES} lines) ---\n{}",
                self.port,
                self.log_path().display(),
                tail(&self.log(), LOG_TAIL_LINES)
            );
            return;
        }
        // A crash the test did not notice (e.g. in a module callback run at shutdown) still
        // fails the test.
        let log = self.log();
        if log.contains("BUG REPORT START") || log.contains("crashed by signal") {
            panic!(
                "server on port {} crashed; log {} (last {LOG_TAIL_LINES} lines):\n{}",
                self.port,
                self.log_path().display(),
                tail(&log, LOG_TAIL_LINES)
            );
        }
        if self.owns_dir {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

const PORT_TAKEN: &str = "the port is served by another process";

/// `process_id` from `INFO server`.
fn server_pid(port: u16) -> Option<u32> {
    let mut c = Conn::try_connect(port, Duration::from_millis(200)).ok()?;
    c.try_send(&["INFO", "server"]).ok()?;
    let info = c.try_recv().ok()?.as_str()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

fn ping(port: u16) -> Result<Reply, String> {
    let mut c = Conn::try_connect(port, Duration::from_millis(200)).map_err(|e| e.to_string())?;
    c.try_send(&["PING"]).map_err(|e| e.to_string())?;
    c.try_recv().map_err(|e| e.to_string())
}

// ---------------------------------------------------------------------------------------------
// Waiting
// ---------------------------------------------------------------------------------------------

/// Poll `cond` every 10 ms until it is true.
///
/// # Panics
/// Naming `what`, if `cond` is still false after `deadline`.
pub fn wait_until(what: &str, deadline: Duration, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + deadline;
    loop {
        if cond() {
            return;
        }
        if Instant::now() >= end {
            panic!("timed out after {deadline:?} waiting for {what}");
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// Wait (10 s) until no AOF rewrite is running or scheduled.
pub fn wait_rewrite_done(c: &mut Conn) {
    wait_until("AOF rewrite", Duration::from_secs(10), || {
        c.info_field("persistence", "aof_rewrite_in_progress")
            .as_deref()
            == Some("0")
            && c.info_field("persistence", "aof_rewrite_scheduled")
                .as_deref()
                == Some("0")
    });
}

/// The files of a server's `appendonlydir` (under its `dir`) whose names end in `suffix`, in
/// the order of the sequence numbers in their names (`appendonly.aof.<n>.incr.aof`).
pub fn aof_files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let aof_dir = dir.join("appendonlydir");
    let mut files: Vec<PathBuf> = fs::read_dir(&aof_dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", aof_dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    files.sort_by_key(|p| {
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        name.trim_end_matches(suffix)
            .rsplit('.')
            .next()
            .and_then(|n| n.parse::<u64>().ok())
            .unwrap_or(0)
    });
    files
}

/// The newest of [`aof_files`].
pub fn aof_file(dir: &Path, suffix: &str) -> PathBuf {
    aof_files(dir, suffix)
        .pop()
        .unwrap_or_else(|| panic!("no *{suffix} in {}", dir.display()))
}

/// Wait (30 s) until the replica has processed everything the master has sent: the master's
/// `master_repl_offset` equals the replica's `slave_repl_offset`.
pub fn wait_replica_synced(master: &Server, replica: &Server) {
    let mut m = master.conn();
    let mut r = replica.conn();
    let end = Instant::now() + REPLICATION_DEADLINE;
    loop {
        let mo = m.info_field("replication", "master_repl_offset");
        let ro = r.info_field("replication", "slave_repl_offset");
        if mo.is_some() && mo == ro {
            return;
        }
        if Instant::now() >= end {
            panic!(
                "replica {} not synced with master {} after 30s: master_repl_offset={mo:?} \
                 slave_repl_offset={ro:?}",
                replica.port, master.port
            );
        }
        thread::sleep(Duration::from_millis(10));
    }
}

// ---------------------------------------------------------------------------------------------
// Command arguments
// ---------------------------------------------------------------------------------------------

/// A value usable as a command argument in [`args!`]: strings, byte strings and numbers.
pub trait Arg {
    /// The argument's bytes on the wire.
    fn arg(&self) -> Vec<u8>;
}

impl<T: Arg + ?Sized> Arg for &T {
    fn arg(&self) -> Vec<u8> {
        (**self).arg()
    }
}
impl Arg for str {
    fn arg(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for String {
    fn arg(&self) -> Vec<u8> {
        self.as_bytes().to_vec()
    }
}
impl Arg for [u8] {
    fn arg(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl<const N: usize> Arg for [u8; N] {
    fn arg(&self) -> Vec<u8> {
        self.to_vec()
    }
}
impl Arg for Vec<u8> {
    fn arg(&self) -> Vec<u8> {
        self.clone()
    }
}
macro_rules! impl_arg_display {
    ($($t:ty),*) => {$(
        impl Arg for $t {
            fn arg(&self) -> Vec<u8> {
                self.to_string().into_bytes()
            }
        }
    )*};
}
impl_arg_display!(
    i8, i16, i32, i64, i128, isize, u8, u16, u32, u64, u128, usize, f32, f64
);

/// Build a command from mixed arguments: `c.cmd(&args!["RL.GCRA", key, 10, 1, "1s", "AT", now])`.
/// Each argument is anything implementing [`Arg`] (`&str`, `String`, `&[u8]`, `Vec<u8>`, numbers);
/// the result is an array of `Vec<u8>`, usable with every `Conn` method.
#[macro_export]
macro_rules! args {
    ($($a:expr),* $(,)?) => {
        [$($crate::common::Arg::arg(&$a)),*]
    };
}

// ---------------------------------------------------------------------------------------------
// RESP client
// ---------------------------------------------------------------------------------------------

/// One RESP2 or RESP3 reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// `+OK`
    Simple(String),
    /// `-ERR ...` or a RESP3 blob error: the full text, code included (`"ERR syntax error"`).
    Error(String),
    /// `:42`
    Int(i64),
    /// `$3\r\nfoo`
    Bulk(Vec<u8>),
    /// RESP2 null bulk/array (`$-1`, `*-1`) or RESP3 `_`.
    Nil,
    /// `*N`
    Array(Vec<Reply>),
    /// RESP3 `%N`
    Map(Vec<(Reply, Reply)>),
    /// RESP3 `,3.14` (kept as text: `inf`, `-inf`, `nan` are valid).
    Double(String),
    /// RESP3 `#t` / `#f`
    Bool(bool),
    /// RESP3 `~N`
    Set(Vec<Reply>),
    /// RESP3 `=N\r\ntxt:...`: the text after the 3-letter format and colon.
    Verbatim(String),
    /// RESP3 `(12345678901234567890`
    BigNum(String),
    /// RESP3 `>N` out-of-band push (pub/sub, client tracking).
    Push(Vec<Reply>),
}

impl Reply {
    /// The integer of an `Int` reply.
    pub fn as_int(&self) -> Option<i64> {
        match self {
            Reply::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// The bytes of a `Bulk`, `Simple` or `Verbatim` reply.
    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Reply::Bulk(b) => Some(b),
            Reply::Simple(s) | Reply::Verbatim(s) => Some(s.as_bytes()),
            _ => None,
        }
    }

    /// Text of a `Simple`, `Bulk` (lossy UTF-8), `Verbatim`, `Double` or `BigNum` reply.
    pub fn as_str(&self) -> Option<String> {
        match self {
            Reply::Bulk(b) => Some(String::from_utf8_lossy(b).into_owned()),
            Reply::Simple(s) | Reply::Verbatim(s) | Reply::Double(s) | Reply::BigNum(s) => {
                Some(s.clone())
            }
            _ => None,
        }
    }

    /// The elements of an `Array`, `Set` or `Push` reply.
    pub fn as_array(&self) -> Option<&[Reply]> {
        match self {
            Reply::Array(v) | Reply::Set(v) | Reply::Push(v) => Some(v),
            _ => None,
        }
    }

    /// True for a null reply.
    pub fn is_nil(&self) -> bool {
        matches!(self, Reply::Nil)
    }

    /// True for an error reply.
    pub fn is_error(&self) -> bool {
        matches!(self, Reply::Error(_))
    }
}

/// A blocking RESP connection to one server. Every read has a 10 s timeout.
pub struct Conn {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
    port: u16,
}

fn encode<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn show<A: AsRef<[u8]>>(args: &[A]) -> String {
    args.iter()
        .map(|a| String::from_utf8_lossy(a.as_ref()).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

impl Conn {
    /// Connect to `127.0.0.1:port`.
    ///
    /// # Panics
    /// If the connection fails.
    pub fn connect(port: u16) -> Conn {
        Conn::try_connect(port, Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("connect to 127.0.0.1:{port}: {e}"))
    }

    fn try_connect(port: u16, timeout: Duration) -> std::io::Result<Conn> {
        let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
        let stream = TcpStream::connect_timeout(&addr, timeout)?;
        stream.set_read_timeout(Some(READ_TIMEOUT))?;
        stream.set_write_timeout(Some(READ_TIMEOUT))?;
        stream.set_nodelay(true)?;
        let writer = stream.try_clone()?;
        Ok(Conn {
            reader: BufReader::new(stream),
            writer,
            port,
        })
    }

    /// The server port this connection talks to.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Send one command and read its reply.
    pub fn cmd<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.send(args);
        self.recv_for(&format!("`{}`", show(args)))
    }

    /// Write one command without reading the reply (pipelining); read it later with `recv`.
    pub fn send<A: AsRef<[u8]>>(&mut self, args: &[A]) {
        if let Err(e) = self.try_send(args) {
            panic!("send `{}` to port {}: {e}", show(args), self.port);
        }
    }

    fn try_send<A: AsRef<[u8]>>(&mut self, args: &[A]) -> std::io::Result<()> {
        self.writer.write_all(&encode(args))
    }

    /// Read one reply.
    ///
    /// # Panics
    /// On a timeout (10 s), a closed connection or a protocol error.
    pub fn recv(&mut self) -> Reply {
        self.recv_for("a reply")
    }

    /// Read one reply; `what` names it in the panic message.
    fn recv_for(&mut self, what: &str) -> Reply {
        match self.try_recv() {
            Ok(r) => r,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => panic!(
                "no reply to {what} from port {} within {READ_TIMEOUT:?} (server hung?)",
                self.port
            ),
            Err(e) => panic!("reading the reply to {what} from port {}: {e}", self.port),
        }
    }

    /// Read one reply, returning the I/O error (a closed connection: the server died) instead
    /// of panicking.
    pub fn try_recv(&mut self) -> std::io::Result<Reply> {
        read_reply(&mut self.reader)
    }

    /// `cmd`, panicking with the command and the error if the reply is an error.
    pub fn ok<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        match self.cmd(args) {
            Reply::Error(e) => panic!("`{}` failed: {e}", show(args)),
            r => r,
        }
    }

    /// `cmd`, expecting an integer reply.
    pub fn int<A: AsRef<[u8]>>(&mut self, args: &[A]) -> i64 {
        match self.cmd(args) {
            Reply::Int(i) => i,
            r => panic!("`{}`: expected an integer, got {r:?}", show(args)),
        }
    }

    /// `cmd`, expecting an array of integers.
    pub fn ints<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Vec<i64> {
        match self.cmd(args) {
            Reply::Array(items) => items
                .iter()
                .map(|r| match r {
                    Reply::Int(i) => *i,
                    _ => panic!(
                        "`{}`: expected an array of integers, got {items:?}",
                        show(args)
                    ),
                })
                .collect(),
            r => panic!("`{}`: expected an array of integers, got {r:?}", show(args)),
        }
    }

    /// `cmd`, expecting an error; returns its full text, e.g. `"ERR syntax error"`.
    pub fn err<A: AsRef<[u8]>>(&mut self, args: &[A]) -> String {
        match self.cmd(args) {
            Reply::Error(e) => e,
            r => panic!("`{}`: expected an error, got {r:?}", show(args)),
        }
    }

    /// One `field:value` line of `INFO section`.
    pub fn info_field(&mut self, section: &str, field: &str) -> Option<String> {
        let info = match self.ok(&["INFO", section]) {
            Reply::Bulk(b) => String::from_utf8_lossy(&b).into_owned(),
            Reply::Verbatim(s) => s,
            r => panic!("INFO {section}: unexpected reply {r:?}"),
        };
        info.lines().find_map(|line| {
            let (k, v) = line.split_once(':')?;
            (k == field).then(|| v.trim_end().to_string())
        })
    }
}

impl Drop for Conn {
    fn drop(&mut self) {
        let _ = self.writer.shutdown(Shutdown::Both);
    }
}

fn protocol_error(msg: String) -> std::io::Error {
    std::io::Error::new(ErrorKind::InvalidData, msg)
}

/// One CRLF-terminated line, without the CRLF.
fn read_line(r: &mut impl BufRead) -> std::io::Result<String> {
    let mut buf = Vec::new();
    let n = r.read_until(b'\n', &mut buf)?;
    if n == 0 {
        return Err(std::io::Error::new(
            ErrorKind::UnexpectedEof,
            "connection closed by the server",
        ));
    }
    if !buf.ends_with(b"\r\n") {
        return Err(protocol_error(format!(
            "line not ending in CRLF: {:?}",
            String::from_utf8_lossy(&buf)
        )));
    }
    buf.truncate(buf.len() - 2);
    // Kept lossy, not refused: a status or error line in bytes that are not UTF-8 is a finding
    // for the test to report (its U+FFFD characters fail any printable-ASCII check).
    Ok(String::from_utf8(buf)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

fn parse_len(s: &str) -> std::io::Result<i64> {
    s.parse::<i64>()
        .map_err(|_| protocol_error(format!("bad length {s:?}")))
}

/// `n` bytes followed by CRLF.
fn read_blob(r: &mut impl BufRead, n: i64) -> std::io::Result<Vec<u8>> {
    let n = usize::try_from(n).map_err(|_| protocol_error(format!("bad length {n}")))?;
    let mut buf = vec![0u8; n + 2];
    r.read_exact(&mut buf)?;
    if &buf[n..] != b"\r\n" {
        return Err(protocol_error("blob not followed by CRLF".into()));
    }
    buf.truncate(n);
    Ok(buf)
}

fn read_items(r: &mut impl BufRead, n: i64) -> std::io::Result<Vec<Reply>> {
    (0..n).map(|_| read_reply(r)).collect()
}

fn read_reply(r: &mut impl BufRead) -> std::io::Result<Reply> {
    let line = read_line(r)?;
    let (kind, rest) = line.split_at_checked(1).unwrap_or(("", ""));
    Ok(match kind {
        "+" => Reply::Simple(rest.to_string()),
        "-" => Reply::Error(rest.to_string()),
        ":" => Reply::Int(
            rest.parse()
                .map_err(|_| protocol_error(format!("bad int {rest:?}")))?,
        ),
        "$" => match parse_len(rest)? {
            -1 => Reply::Nil,
            n => Reply::Bulk(read_blob(r, n)?),
        },
        "*" => match parse_len(rest)? {
            -1 => Reply::Nil,
            n => Reply::Array(read_items(r, n)?),
        },
        "_" => Reply::Nil,
        "," => Reply::Double(rest.to_string()),
        "#" => match rest {
            "t" => Reply::Bool(true),
            "f" => Reply::Bool(false),
            _ => return Err(protocol_error(format!("bad boolean {rest:?}"))),
        },
        "(" => Reply::BigNum(rest.to_string()),
        "!" => {
            let blob = read_blob(r, parse_len(rest)?)?;
            Reply::Error(String::from_utf8_lossy(&blob).into_owned())
        }
        "=" => {
            let blob = read_blob(r, parse_len(rest)?)?;
            let text = String::from_utf8_lossy(&blob).into_owned();
            // "txt:" / "mkd:" prefix: three letters and a colon.
            Reply::Verbatim(match text.get(3..4) {
                Some(":") => text[4..].to_string(),
                _ => text,
            })
        }
        "%" => {
            let n = parse_len(rest)?;
            let mut pairs = Vec::new();
            for _ in 0..n {
                let k = read_reply(r)?;
                let v = read_reply(r)?;
                pairs.push((k, v));
            }
            Reply::Map(pairs)
        }
        "~" => Reply::Set(read_items(r, parse_len(rest)?)?),
        ">" => Reply::Push(read_items(r, parse_len(rest)?)?),
        "|" => {
            // Attributes describe the reply that follows; skip them and return that reply.
            let n = parse_len(rest)?;
            read_items(r, n * 2)?;
            return read_reply(r);
        }
        _ => return Err(protocol_error(format!("unknown reply type in {line:?}"))),
    })
}

// ---------------------------------------------------------------------------------------------
// Time
// ---------------------------------------------------------------------------------------------

/// A round second one hour after this test binary started, in Unix ms: `AT` times after it are
/// in the future, so keys (whose expiry is absolute, counted from `AT`) do not expire during a
/// test. It is the same for every call in the binary, so two calls never straddle a second.
pub fn base_ms() -> u64 {
    static BASE: OnceLock<u64> = OnceLock::new();
    *BASE.get_or_init(|| {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .expect("clock after 1970")
            .as_millis() as u64;
        (now / 1000 + 3600) * 1000
    })
}

/// An integer reply.
pub fn int(i: i64) -> Reply {
    Reply::Int(i)
}

/// A bulk string reply.
pub fn bulk(s: &str) -> Reply {
    Reply::Bulk(s.as_bytes().to_vec())
}

/// One limiter's entry of a RESP2 detailed reply (`DETAIL`): name, key, then cost, granted,
/// limit, remaining, retry_after_ms, reset_after_ms, window_ms, and a nil policy.
pub fn entry(name: &str, key: &str, values: [i64; 7]) -> Reply {
    let mut v = vec![bulk(name), bulk(key)];
    v.extend(values.into_iter().map(int));
    v.push(Reply::Nil);
    Reply::Array(v)
}

/// The RESP2 detailed reply: the five integers, `denied_by`, `reason` and the entries.
pub fn detailed(
    head: [i64; 5],
    denied_by: Option<&str>,
    reason: &str,
    entries: Vec<Reply>,
) -> Reply {
    let mut v: Vec<Reply> = head.into_iter().map(int).collect();
    v.push(denied_by.map_or(Reply::Nil, bulk));
    v.push(bulk(reason));
    v.push(Reply::Array(entries));
    Reply::Array(v)
}

/// `DEBUG DIGEST-VALUE key`: equal values have equal digests.
pub fn digest(c: &mut Conn, key: &str) -> Reply {
    c.cmd(&["DEBUG", "DIGEST-VALUE", key])
}

// ---------------------------------------------------------------------------------------------
// Named policies
// ---------------------------------------------------------------------------------------------

/// `RL.POLICY LIST` as (name, version) pairs, from RESP2's flat array.
pub fn policy_list(c: &mut Conn) -> Vec<(String, i64)> {
    let r = c.cmd(&["RL.POLICY", "LIST"]);
    let items = r
        .as_array()
        .unwrap_or_else(|| panic!("LIST: {r:?}"))
        .to_vec();
    items
        .chunks(2)
        .map(|p| {
            (
                p[0].as_str().expect("name"),
                p[1].as_int().expect("version"),
            )
        })
        .collect()
}

/// `RL.POLICY SET <def...>`, its version.
pub fn policy_set(c: &mut Conn, def: &[&str]) -> i64 {
    let mut call = vec!["RL.POLICY", "SET"];
    call.extend(def);
    c.int(&call)
}
