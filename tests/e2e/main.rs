//! End to end: the real `rendergate` binary, the real `haproxy`, driven over
//! its command line and its NDJSON stream exactly as docs/protocol.md writes them.
//!
//! `RENDERGATE_TEST_HAPROXY` names the haproxy to use (default: `haproxy`).

#[path = "../needs.rs"]
mod needs;
mod support;

mod binary_changes;
mod check_command;
mod config_dir;
mod core_contract;
mod deploy_kit;
mod hello;
mod input_lines;
mod integrity;
mod log_lines;
mod nothing_left_behind;
mod promotion;
mod render_bytes;
mod render_limits;
mod serve_stream;
mod start_held;
mod verdict_kinds;
mod world;
mod world_trial;
