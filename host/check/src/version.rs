//! The version a haproxy binary reports (`haproxy -v`), for `serve`'s `hello`
//! line and the logs. Only a name for people: the verdict memory keys on the
//! binary's hash ([`crate::identity`]), never on this.

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

/// How long `haproxy -v` may take: it reads no configuration and answers in
/// milliseconds; a binary that hangs delays `serve`'s start by this, once.
const VERSION_TIMEOUT: Duration = Duration::from_secs(2);

/// The version on `haproxy -v`'s first line (`HAProxy version 2.6.12-1 …`),
/// or `None` when the binary does not run or says no such line in time.
pub async fn haproxy_version(binary: &Path) -> Option<String> {
    let run = tokio::process::Command::new(binary)
        .arg("-v")
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(VERSION_TIMEOUT, run).await.ok()?.ok()?;
    version_in(&String::from_utf8_lossy(&output.stdout)).map(str::to_owned)
}

/// The word after `version` on the first line, if it has one.
fn version_in(text: &str) -> Option<&str> {
    let mut words = text.lines().next()?.split_whitespace();
    words.find(|w| w.eq_ignore_ascii_case("version"))?;
    words.next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_after_version_on_the_first_line() {
        let v26 =
            "HAProxy version 2.6.12-1+deb12u4 2023/12/16 - https://haproxy.org/\nStatus: long-term";
        assert_eq!(version_in(v26), Some("2.6.12-1+deb12u4"));
        let v32 = "HAProxy version 3.2.0-e134140 2025/05/28 - https://haproxy.org/\n";
        assert_eq!(version_in(v32), Some("3.2.0-e134140"));
        assert_eq!(version_in("usage: not haproxy\nversion 9"), None);
        assert_eq!(version_in(""), None);
    }

    #[tokio::test]
    async fn a_binary_that_does_not_run_has_no_version() {
        assert_eq!(haproxy_version(Path::new("/nonexistent/haproxy")).await, None);
    }
}
