//! The demo (placeholder while the runtime lands).
fn main() {}
