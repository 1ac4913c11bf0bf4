// A reducer must be `fn(&mut Field, Update)`: a mismatch points at the reducer path.
fn concat(current: &mut String, update: i64) {
    current.push_str(&update.to_string());
}

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S {
    #[state(reducer = concat)]
    text: String,
}

fn main() {}
