// Only name, state, interrupt_before/after, node, edge and route are accepted.
fn main() {
    let _ = kit::graph! {
        nodes a;
    };
}
