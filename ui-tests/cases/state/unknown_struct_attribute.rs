// The struct-level #[state(..)] option is `crate = path`.
#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
#[state(krate = kit)]
struct S {
    n: i64,
}

fn main() {}
