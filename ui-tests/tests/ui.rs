//! Compile-fail and compile-pass cases of kit's macros.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.pass("cases/pass/*.rs");
    t.compile_fail("cases/state/*.rs");
    t.compile_fail("cases/graph/*.rs");
    t.compile_fail("cases/agent/*.rs");
    t.compile_fail("cases/tool/*.rs");
}
