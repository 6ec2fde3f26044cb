//! The deployment kit (examples/deploy/) agrees with the real binary, with
//! itself and with examples/alerts.yaml: every rendergate flag the manifests
//! use is one the binary takes, the metrics port is the same everywhere, the
//! policy is where the Dockerfile puts it, the compile cache is an emptyDir,
//! and the PrometheusRule holds exactly the alerts file's groups.
//!
//! Each check also runs on a broken copy of the kit and must name the break,
//! so none of them can pass vacuously. The Dockerfile itself is never built
//! here (no container runtime): only its COPY lines and build line are read.

use serde::Deserialize;
use serde_yaml_ng::Value;
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;

fn examples() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

/// The kit's three files, as text, so a test can break one.
#[derive(Clone)]
struct Kit {
    kubernetes: String,
    dockerfile: String,
    alerts: String,
}

impl Kit {
    fn read() -> Kit {
        let read = |path: PathBuf| {
            std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
        };
        Kit {
            kubernetes: read(examples().join("deploy/kubernetes.yaml")),
            dockerfile: read(examples().join("deploy/Dockerfile")),
            alerts: read(examples().join("alerts.yaml")),
        }
    }

    /// The same kit with `from` replaced by `to` in one file; `from` must occur.
    fn broken(&self, file: File, from: &str, to: &str) -> Kit {
        let mut kit = self.clone();
        let text = match file {
            File::Kubernetes => &mut kit.kubernetes,
            File::Dockerfile => &mut kit.dockerfile,
            File::Alerts => &mut kit.alerts,
        };
        assert!(text.contains(from), "the kit no longer holds {from:?}: update this test");
        *text = text.replacen(from, to, 1);
        kit
    }
}

/// Which of the kit's files a test breaks.
enum File {
    Kubernetes,
    Dockerfile,
    Alerts,
}

/// The flags `rendergate SUBCOMMAND --help` declares (the words starting an
/// option line: `-h, --help`, `--policy <FILE.wasm>`).
fn declared_flags(subcommand: &str) -> BTreeSet<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_rendergate"))
        .args([subcommand, "--help"])
        .output()
        .expect("run rendergate --help");
    assert!(out.status.success(), "rendergate {subcommand} --help: {out:?}");
    let help = String::from_utf8(out.stdout).expect("help is UTF-8");
    let flags: BTreeSet<String> = help
        .lines()
        .filter(|line| line.trim_start().starts_with('-'))
        .flat_map(|line| {
            line.split_whitespace()
                .take_while(|word| word.starts_with('-'))
                .map(|word| word.trim_end_matches(',').to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(flags.contains("--help"), "no flags read from {help}");
    flags
}

/// Flags in `words` (a rendergate command line, its subcommand first) that
/// the binary does not declare.
fn unknown_flags(words: &[String]) -> Vec<String> {
    let declared = declared_flags(&words[0]);
    words
        .iter()
        .filter(|word| word.starts_with("--"))
        .map(|word| word.split('=').next().unwrap_or(word).to_owned())
        .filter(|flag| !declared.contains(flag))
        .collect()
}

fn as_str(value: &Value) -> &str {
    value.as_str().unwrap_or_else(|| panic!("not a string: {value:?}"))
}

fn seq(value: &Value) -> &[Value] {
    value.as_sequence().map(Vec::as_slice).unwrap_or(&[])
}

fn named<'a>(list: &'a Value, name: &str) -> &'a Value {
    seq(list)
        .iter()
        .find(|item| item["name"].as_str() == Some(name))
        .unwrap_or_else(|| panic!("nothing named {name:?} in {list:?}"))
}

/// The value after `flag` in `words`.
fn flag_value<'a>(words: &'a [String], flag: &str) -> Option<&'a str> {
    words.iter().position(|word| word == flag).and_then(|at| words.get(at + 1)).map(String::as_str)
}

/// Everything wrong with the kit; empty when it holds together.
fn problems(kit: &Kit) -> Vec<String> {
    let mut problems = Vec::new();
    let documents: Vec<Value> = serde_yaml_ng::Deserializer::from_str(&kit.kubernetes)
        .map(|document| Value::deserialize(document).expect("kubernetes.yaml parses"))
        .collect();
    let kind = |kind: &str| {
        documents
            .iter()
            .find(|document| document["kind"].as_str() == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} in kubernetes.yaml"))
    };
    let pod = &kind("Deployment")["spec"]["template"]["spec"];
    let controller = named(&pod["containers"], "controller");

    // The gate's command line: the controller's arguments after `--`.
    let args: Vec<String> =
        seq(&controller["args"]).iter().map(|arg| as_str(arg).to_owned()).collect();
    let gate: Vec<String> = args.iter().skip_while(|arg| *arg != "--").skip(1).cloned().collect();
    if gate.len() < 2 || !gate[0].ends_with("rendergate") || gate[1] != "serve" {
        problems.push(format!(
            "the controller's args do not end in `-- rendergate serve ...`: {args:?}"
        ));
        return problems;
    }
    for flag in unknown_flags(&gate[1..]) {
        problems.push(format!("`rendergate serve` does not take {flag}"));
    }

    // The preflight's rendergate lines (a shell script).
    let preflight = named(&pod["initContainers"], "sandbox-preflight");
    let script = seq(&preflight["command"]).last().map(as_str).unwrap_or_default();
    let mut preflight_lines = 0;
    for line in script.lines().map(str::trim).filter(|line| line.starts_with("rendergate ")) {
        preflight_lines += 1;
        let words: Vec<String> = line.split_whitespace().skip(1).map(str::to_owned).collect();
        for flag in unknown_flags(&words) {
            problems.push(format!("`rendergate {}` does not take {flag}", words[0]));
        }
    }
    if preflight_lines == 0 {
        problems.push("the preflight runs no rendergate command".to_owned());
    }

    // One metrics port: --metrics-addr, the containerPort, the probe, the Service.
    let addr = flag_value(&gate, "--metrics-addr").unwrap_or_default();
    let port: u64 = addr.rsplit(':').next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let container_ports = seq(&controller["ports"]);
    let port_name = container_ports
        .iter()
        .find(|p| p["containerPort"].as_u64() == Some(port))
        .and_then(|p| p["name"].as_str());
    if port_name.is_none() {
        problems
            .push(format!("--metrics-addr {addr:?}: no containerPort {port} on the controller"));
    }
    let matches_port = |value: &Value| {
        value.as_u64() == Some(port) || value.as_str().is_some_and(|n| Some(n) == port_name)
    };
    if !matches_port(&controller["livenessProbe"]["httpGet"]["port"]) {
        problems.push(format!("the liveness probe does not ask port {port}"));
    }
    let service = kind("Service");
    if !seq(&service["spec"]["ports"]).iter().any(|p| matches_port(&p["targetPort"])) {
        problems.push(format!("the Service has no targetPort {port}"));
    }

    // The policy is a file the Dockerfile copies from the build stage, and
    // that file is one of the packages the build stage builds.
    let policy = flag_value(&gate, "--policy").unwrap_or_default();
    let copies: Vec<(&str, &str)> = kit
        .dockerfile
        .lines()
        .filter(|line| line.starts_with("COPY --from=build "))
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            (words.len() == 4).then(|| (words[2], words[3]))
        })
        .collect();
    match copies.iter().find(|(_, to)| *to == policy) {
        None => problems.push(format!("--policy {policy:?}: the Dockerfile copies nothing there")),
        Some((from, _)) => {
            let built = from
                .rsplit('/')
                .next()
                .unwrap_or_default()
                .trim_end_matches(".wasm")
                .replace('_', "-");
            if !kit.dockerfile.contains(&format!("-p {built}")) {
                problems
                    .push(format!("the Dockerfile copies {from} but builds no package {built}"));
            }
        }
    }

    // The compile cache is a mount of an emptyDir volume.
    let cache = flag_value(&gate, "--policy-cache").unwrap_or_default();
    match seq(&controller["volumeMounts"]).iter().find(|m| m["mountPath"].as_str() == Some(cache)) {
        None => problems.push(format!("--policy-cache {cache:?} is not a volume mount")),
        Some(mount) => {
            let volume = named(&pod["volumes"], as_str(&mount["name"]));
            if volume.get("emptyDir").is_none() {
                problems
                    .push(format!("--policy-cache {cache:?} is not on an emptyDir: {volume:?}"));
            }
        }
    }

    // The PrometheusRule is examples/alerts.yaml's groups, value for value.
    let rule = kind("PrometheusRule");
    if rule["apiVersion"].as_str() != Some("monitoring.coreos.com/v1") {
        problems.push(format!("PrometheusRule apiVersion {:?}", rule["apiVersion"]));
    }
    let alerts: Value = serde_yaml_ng::from_str(&kit.alerts).expect("alerts.yaml parses");
    if rule["spec"]["groups"] != alerts["groups"] || seq(&alerts["groups"]).is_empty() {
        problems.push("the PrometheusRule's groups differ from examples/alerts.yaml's".to_owned());
    }
    problems
}

#[test]
fn the_kit_agrees_with_the_binary_the_dockerfile_and_the_alerts() {
    let problems = problems(&Kit::read());
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn each_check_names_its_break() {
    let kit = Kit::read();
    use File::*;
    let breaks: [(Kit, &str); 11] = [
        (kit.broken(Kubernetes, "- --start-held", "- --start-holding"), "`rendergate serve` does not take --start-holding"),
        (kit.broken(Kubernetes, "rendergate check --explain", "rendergate check --explained"), "`rendergate check` does not take --explained"),
        (kit.broken(Kubernetes, "- --\n", "- --gate\n"), "do not end in `-- rendergate serve"),
        (kit.broken(Kubernetes, "containerPort: 9464", "containerPort: 9465"), "no containerPort 9464"),
        (kit.broken(Kubernetes, "targetPort: 9464", "targetPort: 9000"), "the Service has no targetPort 9464"),
        (kit.broken(Kubernetes, "              port: 9464", "              port: 9000"), "the liveness probe does not ask port 9464"),
        (
            kit.broken(Dockerfile, "/usr/share/rendergate/policies/scoped_revert.wasm", "/usr/share/rendergate/scoped_revert.wasm"),
            "the Dockerfile copies nothing there",
        ),
        (kit.broken(Dockerfile, "-p scoped-revert", "-p fleet-revert"), "builds no package scoped-revert"),
        (kit.broken(Kubernetes, "mountPath: /var/cache/rendergate", "mountPath: /var/cache/elsewhere"), "is not a volume mount"),
        (
            kit.broken(
                Kubernetes,
                "- name: policy-cache\n          emptyDir:\n            sizeLimit: 256Mi",
                "- name: policy-cache\n          hostPath:\n            path: /var/cache/rendergate",
            ),
            "is not on an emptyDir",
        ),
        (kit.broken(Alerts, "for: 5m", "for: 10m"), "differ from examples/alerts.yaml's"),
    ];
    for (broken, expected) in breaks {
        let problems = problems(&broken);
        assert!(
            problems.iter().any(|p| p.contains(expected)),
            "expected {expected:?} among {problems:#?}"
        );
    }
}
