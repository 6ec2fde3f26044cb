//! The `rendergate` binary: a thin command line over the library.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
