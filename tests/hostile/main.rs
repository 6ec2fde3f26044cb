//! The hostile-config suite: renders that try to make `haproxy -c` leak the
//! gate's secrets, touch the host, outlive the check or exhaust it, run
//! through the real `rendergate` binary and the real haproxy
//! (`RENDERGATE_TEST_HAPROXY` names another).
//!
//! Each case builds a render in a fresh scene (support.rs): a secret file
//! `TOPSECRET-<random>` outside the render, `SECRET_TOKEN=<random>` in the
//! gate's (otherwise empty) environment, a private TMPDIR. It runs through
//! `rendergate check --json --timeout 5s DIR` (or one `rendered` line to
//! `rendergate serve` when it needs the gate's pid or a render path), in
//! the default sandbox mode (strict), and every case asserts:
//! - the verdict kind (exit status and the JSON `ok`/`refused` agree);
//! - no secret in anything the gate printed (nor /etc/passwd's first line,
//!   nor the case's own markers), and no host path of the check directory;
//! - the message is at most 70 KiB;
//! - no file created outside the render (next to the secret, at the paths
//!   the case aims at, in the gate's TMPDIR);
//! - no process left behind (by the case's tag in a command line, or a
//!   working directory inside the scene; zombies are dead);
//! - the wall time is under the deadline + 1 s.
//!
//! Cases needing Lua, `openssl` or `cc` are skipped with a note when the
//! host lacks them, and fail in CI (tests/needs.rs); cases aimed at a host
//! file this host lacks are skipped everywhere. `RENDERGATE_HOSTILE_CANARY=1`
//! also runs the canary (canary.rs): the leaking fixtures, unsandboxed, must
//! still leak.

mod canary;
mod cases;
mod chmod_render;
mod config_dir_world;
mod host;
mod layers;
mod lua;
mod native;
#[path = "../needs.rs"]
mod needs;
mod oracle;
mod support;

use support::Build;

macro_rules! sandboxed {
    ($($module:ident :: $case:ident),* $(,)?) => {
        /// Every case, sandboxed with the default mode (strict).
        mod sandboxed {
            $(
                #[test]
                fn $case() {
                    crate::support::hostile(stringify!($case), crate::$module::$case, crate::support::SANDBOXED);
                }
            )*
        }
        /// Every case by name, for the canary.
        pub const ALL: &[(&str, Build)] = &[$((stringify!($case), $module::$case)),*];
    };
}

sandboxed! {
    cases::valid_minimal,
    cases::tls_in_directory,
    cases::tls_system_ca,
    cases::resolvers_section,
    cases::daemon_user_chroot_stats,
    cases::user_group_spellings,
    cases::stats_socket_user_group,
    cases::unix_bind_user_group,
    cases::parse_resolv_conf,
    cases::setenv_in_global,
    cases::tls_crt_directory,
    cases::map_ip_outside,
    cases::acl_file_outside,
    cases::errorfile_host_path,
    cases::crt_host_path,
    cases::ca_file_host_path,
    cases::crt_list_host_path,
    cases::http_return_file_host_path,
    cases::proc_self_environ,
    cases::proc_gate_environ,
    cases::proc_self_root_passwd,
    cases::proc_self_root_secret,
    cases::dotdot_in_config,
    cases::dotdot_in_render_path,
    cases::render_file_over_the_config,
    cases::nul_in_render_path,
    cases::double_slash_etc,
    cases::double_slash_secret,
    cases::symlink_in_directory,
    cases::dev_zero_errorfile,
    cases::dev_zero_acl,
    cases::dev_stdin_errorfile,
    cases::dev_stdin_serve,
    cases::fifo_errorfile,
    cases::env_in_notice,
    cases::env_in_bind,
    cases::env_if_defined,
    cases::dns_with_dr,
    cases::alert_flood,
    cases::system_ca_keeps_private_keys,
    lua::lua_valid_script,
    lua::lua_write_outside,
    lua::lua_read_outside,
    lua::lua_getenv,
    lua::lua_os_execute,
    lua::lua_io_popen,
    lua::lua_background,
    lua::lua_load_per_thread,
    lua::lua_require_in_directory,
    lua::lua_require_outside,
    lua::lua_os_exit_forges_a_pass_known_limitation,
    lua::lua_sees_no_other_process_in_proc,
    lua::lua_infinite_loop,
    lua::lua_memory_bomb,
    lua::lua_output_flood,
    lua::check_directory_is_private,
    lua::lua_system_ca_mark_keeps_private_keys,
    native::native_loadlib,
    native::native_require,
    native::native_written_in_check_dir,
    native::native_counts_no_host_pids,
    native::native_thread_outlives_main_and_allocates,
    native::native_far_reservation_meets_the_backstop,
    host::host_name_as_local_peer,
    host::check_hostname_names_the_peer,
    host::resolv_conf_and_hosts_are_stand_ins,
    host::os_release_is_public_or_absent,
    host::passwd_is_names_and_ids,
    host::unknown_accounts_are_refused_as_bare_refuses,
    host::accounts_dir_names_resolve,
    host::lua_paths_are_luas_defaults,
    host::config_dir_holds_the_render,
    host::tmp_is_scratch,
}
