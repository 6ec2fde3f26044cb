//! Configs generated from a seed: plausible renders with a few faults.
//!
//! Each case draws how faulty it is (most lines fine, or a few per hundred,
//! or many), then writes `global`, `defaults`, frontends, backends and maps
//! where every directive is either a good spelling or one of its faults:
//! unknown keywords and fetches, `use_backend` naming a missing backend or
//! an unknown ACL, bad binds, ports and timeouts, map files that are missing
//! or malformed. Files are named relatively (`maps/hosts.map`), with no
//! `default-path` or `default-path config`, so both sides find the same
//! files. The generator never decides a case's kind: bare HAProxy does.

use crate::case::Case;
use crate::rng::{Rng, case_seed};

/// Builds case `index` of the corpus seeded with `seed`.
pub fn case(seed: u64, index: usize) -> Case {
    let case_seed = case_seed(seed, index);
    let mut g = Gen::new(case_seed);
    let config = g.config();
    let mut case = Case::new(format!("gen-{index:04}"), config);
    case.seed = Some(case_seed);
    case.files = g.files.into_iter().map(|(path, content)| (path, content.into_bytes())).collect();
    case
}

struct Gen {
    rng: Rng,
    /// Percent of directives written with a fault.
    fault_rate: u32,
    backends: Vec<String>,
    files: Vec<(String, String)>,
    /// Map files the config names; each is written (or not) at the end.
    maps_named: Vec<&'static str>,
    /// The config so far, line by line.
    lines: Vec<String>,
    port: u16,
}

impl Gen {
    fn new(seed: u64) -> Gen {
        let mut rng = Rng::new(seed);
        let fault_rate = *rng.pick(&[0, 0, 0, 3, 6, 12, 25]);
        Gen {
            rng,
            fault_rate,
            backends: Vec::new(),
            files: Vec::new(),
            maps_named: Vec::new(),
            lines: Vec::new(),
            port: 20000,
        }
    }

    /// Whether the next directive is written with a fault.
    fn fault(&mut self) -> bool {
        self.fault_rate > 0 && self.rng.chance(self.fault_rate)
    }

    fn line(&mut self, text: impl Into<String>) {
        let indent = if self.rng.chance(10) { "\t" } else { "    " };
        self.lines.push(format!("{indent}{}", text.into()));
    }

    fn section(&mut self, text: impl Into<String>) {
        self.lines.push(text.into());
    }

    /// Either `good` or one of `bad`, as [`Gen::fault`] decides.
    fn either(&mut self, good: &str, bad: &[&str]) -> String {
        if self.fault() { self.rng.pick(bad).to_string() } else { good.to_owned() }
    }

    fn next_port(&mut self) -> u16 {
        self.port += 1 + self.rng.below(50) as u16;
        self.port
    }

    fn backend_name(&mut self) -> String {
        if self.fault() {
            self.rng.pick(&["missing", "b9", "B0", "b_0"]).to_string()
        } else {
            let i = self.rng.below(self.backends.len());
            self.backends[i].clone()
        }
    }

    fn config(&mut self) -> String {
        let n_backends = 1 + self.rng.below(4);
        self.backends = (0..n_backends).map(|i| format!("b{i}")).collect();
        self.global();
        self.defaults();
        // Now and then no frontend at all: HAProxy's "no listener" exit 2.
        let n_frontends = *self.rng.pick(&[0, 1, 1, 1, 1, 1, 2, 2, 2]);
        for i in 0..n_frontends {
            self.frontend(i);
        }
        if self.rng.chance(15) {
            self.listen();
        }
        for name in self.backends.clone() {
            self.backend(&name);
        }
        self.write_maps();
        let mut text = self.lines.join("\n");
        if !self.rng.chance(3) {
            text.push('\n');
        }
        text
    }

    fn global(&mut self) {
        self.section("global");
        if self.rng.chance(20) {
            self.line("default-path config");
        }
        let options: [(&str, &[&str]); 6] = [
            ("maxconn 2000", &["maxconn lots", "maxconn"]),
            ("nbthread 2", &["nbthread two"]),
            ("log stdout format raw local0", &["log stdout local99", "log"]),
            ("tune.bufsize 16384", &["tune.bufsize big"]),
            ("hard-stop-after 30s", &["hard-stop-after 30parsecs"]),
            ("stats timeout 30s", &["stats timeout soon"]),
        ];
        for (good, bad) in options {
            if self.rng.chance(35) {
                let text = self.either(good, bad);
                self.line(text);
            }
        }
        if self.fault() {
            let text = *self.rng.pick(&["bogus-directive on", "maxconnn 10", "option httplog"]);
            self.line(text);
        }
    }

    fn defaults(&mut self) {
        if self.rng.chance(10) {
            return;
        }
        self.section("defaults");
        let mode = self.either("mode http", &["mode smtp", "mode"]);
        self.line(mode);
        // Missing timeouts are HAProxy's most common warning.
        for which in ["client", "server", "connect"] {
            if self.rng.chance(75) {
                let good = format!("timeout {which} {}s", 1 + self.rng.below(30));
                let bad = [
                    format!("timeout {which} 5 years"),
                    format!("timeout {which} 5y"),
                    format!("timeout {which}"),
                ];
                let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
                let text = self.either(&good, &bad);
                self.line(text);
            }
        }
        if self.rng.chance(40) {
            let text = self.either("option httplog", &["option bogus", "option httplogg"]);
            self.line(text);
        }
        if self.rng.chance(30) {
            let text = self.either("retries 3", &["retries -x"]);
            self.line(text);
        }
    }

    fn bind(&mut self) -> String {
        let port = self.next_port();
        if self.fault() {
            let bad = [
                "bind 127.0.0.1:99999".to_owned(),
                "bind 300.1.1.1:80".to_owned(),
                format!("bind 127.0.0.1:{port} bogus-option"),
                "bind".to_owned(),
                format!("bind 127.0.0.1:{port} ssl crt missing.pem"),
            ];
            return self.rng.pick(&bad).clone();
        }
        let good = [
            format!("bind 127.0.0.1:{port}"),
            format!("bind :{port}"),
            format!("bind ipv4@127.0.0.1:{port} name p{port}"),
        ];
        self.rng.pick(&good).clone()
    }

    fn frontend(&mut self, index: usize) {
        self.section(format!("frontend f{index}"));
        for _ in 0..1 + self.rng.below(2) {
            let bind = self.bind();
            self.line(bind);
        }
        if self.rng.chance(20) {
            let text = self.either("timeout client 5s", &["timeout client 5 y"]);
            self.line(text);
        }
        let mut acls = Vec::new();
        for i in 0..self.rng.below(4) {
            let name = format!("a{i}");
            let (good, bad): (String, Vec<String>) = match self.rng.below(4) {
                0 => (
                    format!("acl {name} path_beg /api{i}"),
                    vec![format!("acl {name} path_begx /api"), format!("acl {name} pathbeg /api")],
                ),
                1 => (
                    format!("acl {name} hdr(host) -i example{i}.com"),
                    vec![
                        format!("acl {name} hdr(host -i example.com"),
                        format!("acl {name} hdr(host) -z x"),
                    ],
                ),
                2 => (
                    format!("acl {name} src 10.0.0.0/8"),
                    vec![
                        format!("acl {name} src 10.0.0.0/99"),
                        format!("acl {name} src_bogus 10.0.0.0/8"),
                    ],
                ),
                _ => {
                    self.maps_named.push("maps/acl.lst");
                    (
                        format!("acl {name} path -f maps/acl.lst"),
                        vec![format!("acl {name} path -f maps/none.lst")],
                    )
                }
            };
            let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
            let text = self.either(&good, &bad);
            self.line(text);
            acls.push(name);
        }
        if self.rng.chance(40) {
            self.maps_named.push("maps/hosts.map");
            let path = if self.fault() { "maps/nohosts.map" } else { "maps/hosts.map" };
            self.line(format!(
                "http-request set-header X-Route %[req.hdr(host),lower,map({path},none)]"
            ));
        }
        if self.rng.chance(15) {
            self.maps_named.push("maps/ips.map");
            self.line("http-request set-header X-Net %[src,map_ip(maps/ips.map,none)]");
        }
        if self.rng.chance(30) {
            let condition = self.condition(&acls);
            let action = self.either("deny", &["bogus-action", "deny deny_status 999"]);
            self.line(format!("http-request {action} if {condition}"));
        }
        for _ in 0..self.rng.below(3) {
            let backend = self.backend_name();
            let condition = self.condition(&acls);
            self.line(format!("use_backend {backend} if {condition}"));
        }
        if self.rng.chance(15) {
            self.maps_named.push("maps/hosts.map");
            self.line("use_backend %[req.hdr(host),lower,map(maps/hosts.map,b0)]");
        }
        if self.rng.chance(85) {
            let backend = self.backend_name();
            self.line(format!("default_backend {backend}"));
        }
    }

    /// An ACL name the frontend defined, an anonymous ACL, or (as a fault)
    /// a name nobody defined.
    fn condition(&mut self, acls: &[String]) -> String {
        if self.fault() {
            return self.rng.pick(&["undefined_acl", "a7", "{ path_begx /x }", "!"]).to_string();
        }
        if acls.is_empty() || self.rng.chance(30) {
            return "{ path_beg /static }".to_owned();
        }
        let name = self.rng.pick(acls).clone();
        if self.rng.chance(20) { format!("!{name}") } else { name }
    }

    fn listen(&mut self) {
        self.section("listen stats");
        let bind = self.bind();
        self.line(bind);
        let text = self.either("stats enable", &["stats enabled"]);
        self.line(text);
        if self.rng.chance(50) {
            let text = self.either("stats uri /stats", &["stats uri"]);
            self.line(text);
        }
    }

    fn backend(&mut self, name: &str) {
        self.section(format!("backend {name}"));
        if self.rng.chance(50) {
            let text = self.either("balance roundrobin", &["balance randomish", "balance"]);
            self.line(text);
        }
        if self.rng.chance(30) {
            let text = self.either(
                "option httpchk GET /health",
                &["option httpchk GET /health HTTP/9 extra words"],
            );
            self.line(text);
        }
        if self.rng.chance(25) {
            let text = self.either("timeout server 3s", &["timeout server 3q"]);
            self.line(text);
        }
        for i in 0..self.rng.below(4) {
            let port = 8000 + self.rng.below(1000);
            let good = if self.rng.chance(10) {
                // unresolvable: with -dr a warning on both sides
                format!("server s{i} {name}-{i}.invalid:{port}")
            } else {
                format!(
                    "server s{i} 127.0.0.{}:{port}{}",
                    1 + i,
                    if self.rng.chance(50) { " check" } else { "" }
                )
            };
            let bad = [
                format!("server s{i} 127.0.0.1:{port} chek"),
                format!("server s{i} 127.0.0.1:notaport"),
                format!("server s{i}"),
                format!("server s{i} 127.0.0.1:{port} weight 9999"),
                "server s0 127.0.0.1:1\n    server s0 127.0.0.1:2".to_owned(),
            ];
            let bad: Vec<&str> = bad.iter().map(String::as_str).collect();
            let text = self.either(&good, &bad);
            self.line(text);
        }
        if self.fault() {
            let text = *self.rng.pick(&[
                "bind :80",
                "use_backend b0",
                "bogus-keyword",
                "http-request deny if undefined_acl",
            ]);
            self.line(text);
        }
    }

    /// Writes each map the config named, unless a fault leaves it out or
    /// spoils its content.
    fn write_maps(&mut self) {
        let mut named = std::mem::take(&mut self.maps_named);
        named.sort();
        named.dedup();
        for path in named {
            if self.fault() {
                continue;
            }
            let content = match path {
                "maps/ips.map" => {
                    let bad = self.fault();
                    format!(
                        "10.0.0.0/8 b0\n{}192.168.0.0/16 b1\n",
                        if bad { "not-an-ip b0\n" } else { "" }
                    )
                }
                "maps/acl.lst" => "/admin\n/internal\n".to_owned(),
                _ => {
                    let n = 1 + self.rng.below(20);
                    (0..n)
                        .map(|i| format!("host{i}.example b{}\n", i % self.backends.len()))
                        .collect()
                }
            };
            self.files.push((path.to_owned(), content));
        }
    }
}
