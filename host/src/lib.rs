//! rendergate: a render gate for HAProxy fleets.
pub mod core;
pub mod render;
