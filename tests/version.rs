//! One version everywhere: Cargo.toml's is the source; `MODULE LIST` shows it encoded as Redis
//! modules do (`major * 10000 + minor * 100 + patch`), `INFO ratelimit` as text, and every package
//! of the repository (the client packages, and the Go client and the RLS service where they
//! exist) declares the same; CHANGELOG.md has a section for it.

mod common;
use common::*;

use std::path::{Path, PathBuf};

const VERSION: &str = env!("CARGO_PKG_VERSION");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `major.minor.patch` as numbers (a pre-release suffix is not used by this project).
fn parts(v: &str) -> [i64; 3] {
    let p: Vec<i64> = v
        .split('.')
        .map(|n| {
            n.parse()
                .unwrap_or_else(|_| panic!("version {v:?} is not major.minor.patch"))
        })
        .collect();
    assert_eq!(p.len(), 3, "version {v:?} is not major.minor.patch");
    [p[0], p[1], p[2]]
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// The first `"version": "x"` (package.json) or `version = "x"` (TOML) line of a manifest.
fn manifest_version(path: &Path) -> String {
    read(path)
        .lines()
        .find_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("\"version\"")
                .or_else(|| line.strip_prefix("version"))?;
            let rest = rest.trim_start().strip_prefix([':', '='])?.trim_start();
            Some(rest.strip_prefix('"')?.split('"').next()?.to_string())
        })
        .unwrap_or_else(|| panic!("{} declares no version", path.display()))
}

#[test]
fn module_list_shows_the_encoded_version_and_info_the_text() {
    let s = Server::start();
    let mut c = s.conn();
    let [major, minor, patch] = parts(VERSION);
    let list = c.cmd(&["MODULE", "LIST"]);
    let modules = list.as_array().expect("MODULE LIST is an array");
    let ours = modules
        .iter()
        .find_map(|m| {
            let fields = m.as_array()?;
            let name = fields
                .iter()
                .position(|f| f.as_str().as_deref() == Some("name"))?;
            (fields.get(name + 1)?.as_str().as_deref() == Some("ratelimit")).then_some(fields)
        })
        .unwrap_or_else(|| panic!("no ratelimit module in {list:?}"));
    let ver = ours
        .iter()
        .position(|f| f.as_str().as_deref() == Some("ver"))
        .and_then(|i| ours.get(i + 1)?.as_int())
        .unwrap_or_else(|| panic!("no ver in {ours:?}"));
    assert_eq!(ver, major * 10000 + minor * 100 + patch);
    assert_eq!(
        c.info_field("ratelimit", "ratelimit_version").as_deref(),
        Some(VERSION)
    );
}

#[test]
fn every_package_declares_the_module_version() {
    let root = root();
    for manifest in ["clients/python/pyproject.toml", "clients/node/package.json"] {
        assert_eq!(
            manifest_version(&root.join(manifest)),
            VERSION,
            "{manifest}"
        );
    }
    // The Python package's __version__ and the Node lock file's own entry.
    let init = read(&root.join("clients/python/src/redis_ratelimit_client/__init__.py"));
    assert!(
        init.contains(&format!("__version__ = \"{VERSION}\"")),
        "clients/python __version__ is not {VERSION}"
    );
    assert_eq!(
        manifest_version(&root.join("clients/node/package-lock.json")),
        VERSION,
        "clients/node/package-lock.json"
    );
    // Packages added later are held to the same version once they exist: a manifest's version,
    // or in Go a `Version = "x"` constant. A Go module takes its version from its git tag
    // (`clients/go/v0.1.0`), so for Go a missing constant is not an error; one that is there
    // must agree.
    for dir in ["clients/go", "rls"] {
        let dir = root.join(dir);
        if !dir.is_dir() {
            continue;
        }
        let mut found = Vec::new();
        for manifest in ["Cargo.toml", "pyproject.toml", "package.json"] {
            if dir.join(manifest).is_file() {
                found.push((manifest.to_string(), manifest_version(&dir.join(manifest))));
            }
        }
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("dir entry").path();
            if path.extension().is_some_and(|e| e == "go") {
                for line in read(&path).lines() {
                    let line = line.trim().trim_start_matches("const").trim();
                    if let Some(v) = line
                        .strip_prefix("Version")
                        .and_then(|rest| rest.trim_start().strip_prefix('='))
                    {
                        // The quoted value, a trailing comment left out.
                        let v = v.trim().trim_start_matches('"');
                        let v = v.split('"').next().unwrap_or_default().to_string();
                        found.push((path.display().to_string(), v));
                    }
                }
            }
        }
        let go_module = dir.join("go.mod").is_file();
        assert!(
            !found.is_empty() || go_module,
            "{} declares no version (a manifest's, or a Go `Version = \"{VERSION}\"` constant)",
            dir.display()
        );
        for (file, v) in found {
            assert_eq!(v, VERSION, "{} in {}", file, dir.display());
        }
    }
}

#[test]
fn the_changelog_has_a_section_for_the_version() {
    let changelog = read(&root().join("CHANGELOG.md"));
    assert!(
        changelog
            .lines()
            .any(|l| l.starts_with(&format!("## [{VERSION}] - "))),
        "CHANGELOG.md has no `## [{VERSION}] - date` section"
    );
}

/// The configuration snippet shipped in the tarball and the .deb (packaging/ratelimit.conf)
/// lists every module setting with its default, as the server reports it.
#[test]
fn the_config_snippet_lists_every_setting_with_its_default() {
    let snippet = read(&root().join("packaging/ratelimit.conf"));
    let listed: Vec<(String, String)> = snippet
        .lines()
        .filter_map(|l| {
            let (name, value) = l.strip_prefix("# ratelimit.")?.split_once(' ')?;
            Some((format!("ratelimit.{name}"), value.trim().to_string()))
        })
        .collect();
    let s = Server::start_with_exact_module_args(&[], &[]);
    let mut c = s.conn();
    let all = c.cmd(&["CONFIG", "GET", "ratelimit.*"]);
    let pairs: Vec<String> = match &all {
        Reply::Array(items) => items.iter().filter_map(Reply::as_str).collect(),
        Reply::Map(items) => items
            .iter()
            .flat_map(|(k, v)| [k.as_str(), v.as_str()])
            .flatten()
            .collect(),
        other => panic!("CONFIG GET: {other:?}"),
    };
    let server: Vec<(String, String)> = pairs
        .chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect();
    assert!(!server.is_empty(), "{all:?}");
    for (name, default) in &server {
        assert!(
            listed.iter().any(|(n, v)| n == name && v == default),
            "packaging/ratelimit.conf does not list `# {name} {default}`"
        );
    }
    assert_eq!(listed.len(), server.len(), "{listed:?} vs {server:?}");
}
