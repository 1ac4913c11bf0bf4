// A join waits for at most 64 sources (one bit each): 65 distinct nodes are refused.
use kit::graph::{NodeContext, Route};

#[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
struct S { n: i64 }

async fn step(_s: &S, _c: &NodeContext) {}
async fn done(_s: &S, _c: &NodeContext) {}
fn all(_s: &S) -> Route {
    Route::to_all((1..=65).map(|i| format!("s{i}")))
}

fn main() {
    let _ = kit::graph! {
        state: S;
        node s1 = step; node s2 = step; node s3 = step; node s4 = step; node s5 = step;
        node s6 = step; node s7 = step; node s8 = step; node s9 = step; node s10 = step;
        node s11 = step; node s12 = step; node s13 = step; node s14 = step; node s15 = step;
        node s16 = step; node s17 = step; node s18 = step; node s19 = step; node s20 = step;
        node s21 = step; node s22 = step; node s23 = step; node s24 = step; node s25 = step;
        node s26 = step; node s27 = step; node s28 = step; node s29 = step; node s30 = step;
        node s31 = step; node s32 = step; node s33 = step; node s34 = step; node s35 = step;
        node s36 = step; node s37 = step; node s38 = step; node s39 = step; node s40 = step;
        node s41 = step; node s42 = step; node s43 = step; node s44 = step; node s45 = step;
        node s46 = step; node s47 = step; node s48 = step; node s49 = step; node s50 = step;
        node s51 = step; node s52 = step; node s53 = step; node s54 = step; node s55 = step;
        node s56 = step; node s57 = step; node s58 = step; node s59 = step; node s60 = step;
        node s61 = step; node s62 = step; node s63 = step; node s64 = step; node s65 = step;
        node done;
        route START -> [s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16,
            s17, s18, s19, s20, s21, s22, s23, s24, s25, s26, s27, s28, s29, s30, s31, s32, s33,
            s34, s35, s36, s37, s38, s39, s40, s41, s42, s43, s44, s45, s46, s47, s48, s49, s50,
            s51, s52, s53, s54, s55, s56, s57, s58, s59, s60, s61, s62, s63, s64, s65] by all;
        edge [s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15, s16, s17, s18,
            s19, s20, s21, s22, s23, s24, s25, s26, s27, s28, s29, s30, s31, s32, s33, s34, s35,
            s36, s37, s38, s39, s40, s41, s42, s43, s44, s45, s46, s47, s48, s49, s50, s51, s52,
            s53, s54, s55, s56, s57, s58, s59, s60, s61, s62, s63, s64, s65] -> done;
        edge done -> END;
    };
}
