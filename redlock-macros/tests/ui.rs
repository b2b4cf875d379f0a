//! Compile-time behaviour of `#[distributed_lock]` and
//! `#[distributed_semaphore]`: every accepted form in
//! `ui/pass` compiles and runs; every mistake in `ui/fail` fails with the
//! committed `.stderr`. Regenerate with `TRYBUILD=overwrite` and review the
//! diff. The messages are rustc's, so they are pinned to the toolchain
//! these `.stderr` files were written with (see `rustc --version` in CI).

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("tests/ui/pass/*.rs");
    t.compile_fail("tests/ui/fail/*.rs");
}
