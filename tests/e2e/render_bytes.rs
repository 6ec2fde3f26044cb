//! Render files are bytes end to end (docs/protocol.md §2, `encoding`):
//! `check DIR` reads any byte, config included; `serve` takes a file as
//! base64; either way the checksum is over the bytes and HAProxy judges
//! what bare haproxy judges.

use crate::support::*;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Command;

/// Bytes no UTF-8 text holds, as a DER OCSP response starts: NUL, 0xFF,
/// a lone continuation byte, a CR LF.
const DER: &[u8] = &[0x30, 0x82, 0x01, 0x0a, 0x0a, 0x01, 0x00, 0xff, 0xfe, 0x80, 0x0d, 0x0a, 0x00];

/// A map line whose key holds a Latin-1 byte (not UTF-8).
const LATIN1_LINE: &[u8] = b"caf\xe9.example.com echo\n";

/// The sample config with a comment holding byte 0xFF, and a response
/// served from the binary file `errors/ocsp.der` (HAProxy reads it at
/// load: without it the config is refused).
fn binary_config() -> Vec<u8> {
    let text = sample_config().replace(
        "frontend www\n",
        "frontend www\n    http-request return status 200 content-type application/ocsp-response file errors/ocsp.der if { path /ocsp }\n",
    );
    let mut config = b"# caf\xe9 \xff: a comment that is not UTF-8\n".to_vec();
    config.extend_from_slice(text.as_bytes());
    config
}

/// The sample map with a line that is not UTF-8.
fn binary_map() -> Vec<u8> {
    let mut map = std::fs::read(sample_dir().join("maps/hosts.map")).unwrap();
    map.extend_from_slice(LATIN1_LINE);
    map
}

/// The render laid out in a fresh directory, as `check DIR` reads it.
fn laid_out(config: &[u8]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for sub in ["maps", "errors"] {
        std::fs::create_dir(dir.path().join(sub)).unwrap();
    }
    std::fs::write(dir.path().join("haproxy.cfg"), config).unwrap();
    std::fs::write(dir.path().join("maps/hosts.map"), binary_map()).unwrap();
    std::fs::write(dir.path().join("errors/ocsp.der"), DER).unwrap();
    dir
}

/// Bare `haproxy -c` over the same render, laid out on its own with
/// `default-path origin` pointed at it: exit 0 or not.
fn bare_haproxy_passes(config: &[u8]) -> bool {
    let laid = laid_out(config);
    let origin = format!("default-path origin {}", laid.path().to_str().unwrap());
    let config = replace(config, b"default-path origin /etc/haproxy", origin.as_bytes());
    std::fs::write(laid.path().join("haproxy.cfg"), config).unwrap();
    let out = Command::new(real_haproxy())
        .args(["-c", "-f", "haproxy.cfg"])
        .current_dir(laid.path())
        .output()
        .unwrap();
    out.status.success()
}

/// `bytes` with the first `from` replaced by `to`.
fn replace(bytes: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let at = bytes.windows(from.len()).position(|w| w == from).expect("the pattern is there");
    [&bytes[..at], to, &bytes[at + from.len()..]].concat()
}

/// The gate's checksum, computed apart: sha256 over length-prefixed fields
/// (host/core/src/render.rs), each file's kind, path and bytes.
fn checksum(config: &[u8], files: &[(&str, &str, &[u8])]) -> String {
    let mut h = Sha256::new();
    let mut field = |bytes: &[u8]| {
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    };
    field(b"rendergate-render-v1");
    field(config);
    for (kind, path, content) in files {
        field(kind.as_bytes());
        field(path.as_bytes());
        field(content);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

fn check_json(dir: &Path) -> (Option<i32>, Value, String) {
    let out = run(&["check", "--haproxy", &haproxy(), "--json", dir.to_str().unwrap()], "", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let v = lines(&out).into_iter().next().unwrap_or_else(|| panic!("no verdict: {stderr}"));
    (out.status.code(), v, stderr)
}

#[test]
fn check_dir_reads_any_bytes_and_judges_them_as_bare_haproxy_does() {
    let config = binary_config();
    assert!(std::str::from_utf8(&config).is_err() && std::str::from_utf8(&binary_map()).is_err());
    assert!(bare_haproxy_passes(&config), "bare haproxy passes this render");
    let dir = laid_out(&config);
    let (code, v, stderr) = check_json(dir.path());
    assert_eq!((code, v["ok"].as_bool()), (Some(0), Some(true)), "{v} {stderr}");
    // every byte read as it is: the checksum over them, computed apart
    let map = binary_map();
    let files = [("general", "./errors/ocsp.der", DER), ("general", "./maps/hosts.map", &map[..])];
    assert_eq!(v["checksum"], checksum(&config, &files));

    // The binary file is read by HAProxy: without it, both refuse.
    std::fs::remove_file(dir.path().join("errors/ocsp.der")).unwrap();
    let (code, v, _) = check_json(dir.path());
    assert_eq!((code, v["refused"].as_bool()), (Some(1), Some(true)), "{v}");

    // A refused line that is not UTF-8 is quoted, its bytes replaced.
    let broken = replace(
        &config,
        b"    bind :8080\n",
        b"    bind :8080\n    http-request bogus-action \xff\n",
    );
    assert!(!bare_haproxy_passes(&broken), "bare haproxy refuses this render");
    let dir = laid_out(&broken);
    let (code, v, _) = check_json(dir.path());
    assert_eq!((code, v["refused"].as_bool()), (Some(1), Some(true)), "{v}");
    let message = v["message"].as_str().unwrap();
    assert!(message.contains("Config context:"), "{message}");
    assert!(message.contains("http-request bogus-action \u{fffd}"), "{message}");
}

/// A `rendered` line of `config` (text) and files given as
/// `(kind, path, bytes, encoding)`.
fn rendered_with(
    plan: &str,
    render: &str,
    config: &str,
    files: &[(&str, &str, &[u8], &str)],
) -> Value {
    let files: Vec<Value> = files
        .iter()
        .map(|(kind, path, bytes, encoding)| match *encoding {
            "base64" => json!({"kind": kind, "path": path, "encoding": "base64",
                               "content": STANDARD.encode(bytes)}),
            _ => json!({"kind": kind, "path": path,
                        "content": std::str::from_utf8(bytes).expect("a text file")}),
        })
        .collect();
    json!({"type": "rendered", "plan": plan, "render": render, "config": config, "files": files})
}

/// The binary render as `serve` takes it: the config as text (a JSON
/// string), the map and the DER file as base64.
fn serve_config() -> String {
    String::from_utf8(
        binary_config().split_inclusive(|b| *b == b'\n').skip(1).flatten().copied().collect(),
    )
    .expect("the config without its first comment is text")
}

#[test]
fn serve_takes_base64_files_with_one_checksum_per_content_and_names_bad_ones() {
    let config = serve_config();
    let map = binary_map();
    let mut gate = Serve::start(&[]);
    gate.send(&rendered_with(
        "plan-1",
        "r-1",
        &config,
        &[("map", "maps/hosts.map", &map, "base64"), ("general", "errors/ocsp.der", DER, "base64")],
    ));
    let v = gate.next();
    assert_eq!((v["type"].as_str(), v["ok"].as_bool()), (Some("verdict"), Some(true)), "{v}");
    let files = [("map", "maps/hosts.map", &map[..]), ("general", "errors/ocsp.der", DER)];
    assert_eq!(v["checksum"], checksum(config.as_bytes(), &files));

    // One content sent as text, then as base64: one checksum, and the
    // second is remembered (the gate holds them as one content).
    let text_map = std::fs::read(sample_dir().join("maps/hosts.map")).unwrap();
    let as_text = rendered_with(
        "plan-2",
        "r-2",
        &sample_config(),
        &[("map", "maps/hosts.map", &text_map, "text")],
    );
    let as_base64 = rendered_with(
        "plan-2",
        "r-3",
        &sample_config(),
        &[("map", "maps/hosts.map", &text_map, "base64")],
    );
    assert_ne!(as_text, as_base64);
    gate.send(&as_text);
    let text = gate.next();
    gate.send(&as_base64);
    let base64 = gate.next();
    assert_eq!((text["ok"].as_bool(), base64["ok"].as_bool()), (Some(true), Some(true)));
    assert_eq!(text["checksum"], base64["checksum"]);
    assert_eq!(base64["remembered"].as_bool(), Some(true), "{base64}");
    assert_ne!(text["checksum"], v["checksum"]);

    // Bad base64 and an unknown encoding: an error naming the line (the
    // fourth and fifth), nothing judged; the gate goes on.
    let mut bad = as_base64.clone();
    bad["files"][0]["content"] = json!("ZWNobw=x");
    gate.send(&bad);
    let e = gate.next();
    assert_eq!((e["type"].as_str(), e["line"].as_u64()), (Some("error"), Some(4)), "{e}");
    let message = e["message"].as_str().unwrap();
    assert!(
        message.contains(r#"file "maps/hosts.map": `content` is not standard base64"#),
        "{message}"
    );
    bad["files"][0]["encoding"] = json!("hex");
    gate.send(&bad);
    let e = gate.next();
    assert_eq!((e["type"].as_str(), e["line"].as_u64()), (Some("error"), Some(5)), "{e}");
    assert!(
        e["message"]
            .as_str()
            .unwrap()
            .contains("unknown variant `hex`, expected `text` or `base64`"),
        "{e}"
    );
    gate.send(&rendered_with(
        "plan-3",
        "r-4",
        &sample_config(),
        &[("map", "maps/hosts.map", &text_map, "base64")],
    ));
    let v = gate.next();
    assert_eq!((v["plan"].as_str(), v["ok"].as_bool()), (Some("plan-3"), Some(true)), "{v}");
    let (rest, status) = gate.finish();
    assert!(rest.is_empty(), "{rest:?}");
    assert!(status.success());
}

#[test]
fn the_size_limit_counts_decoded_bytes() {
    let config = serve_config();
    let map = std::fs::read(sample_dir().join("maps/hosts.map")).unwrap();
    let files = [
        ("map", "maps/hosts.map", &map[..], "text"),
        ("general", "errors/ocsp.der", DER, "base64"),
    ];
    let line = rendered_with("plan-1", "r-1", &config, &files);
    let decoded = config.len() + map.len() + DER.len();
    let sent = config.len() + map.len() + line["files"][1]["content"].as_str().unwrap().len();
    assert!(sent > decoded);
    for (limit, ok) in [(decoded, true), (decoded - 1, false)] {
        let limit = limit.to_string();
        let mut gate = Serve::start(&["--max-render-size", &limit]);
        gate.send(&line);
        let v = gate.next();
        assert_eq!(v["ok"].as_bool(), Some(ok), "{limit}: {v}");
        if !ok {
            let message = v["message"].as_str().unwrap();
            assert_eq!(v["refused"].as_bool(), Some(false), "could not run: {v}");
            assert!(message.contains(&format!("the render has {} bytes", decoded)), "{message}");
        }
    }
}
