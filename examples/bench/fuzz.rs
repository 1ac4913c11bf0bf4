//! Fuzz: every parser kit runs on outside input (event streams, provider answers and streams,
//! provider errors, worker request bodies, task ids, tool arguments, glob and grep patterns,
//! duration headers, checkpoint chains and blobs) fed hostile inputs from
//! `kit_testing::hostile`, counting inputs and panics. Any panic fails the workload.
//!
//! ```text
//! cargo run --release --example bench -- fuzz                  # 1,000,000 inputs per parser
//! cargo run --release --example bench -- fuzz --inputs=20000   # what `bench -- all` runs
//! cargo run --release --example bench -- fuzz --seed=7         # another sequence of inputs
//! ```

use std::time::Instant;

use kit_testing::hostile::{Report, Target, fuzz as feed};

use crate::fail;
use crate::measure::header;

/// Inputs per parser when no `--inputs=` is given.
pub(crate) const DEFAULT_INPUTS: u64 = 1_000_000;

/// Inputs per parser in `bench -- all`: a few seconds in all.
pub(crate) const ALL_INPUTS: u64 = 20_000;

pub(crate) fn fuzz(inputs: u64, seed: u64) {
    header(&format!(
        "Fuzz: {inputs} hostile inputs per parser (seed {seed}), panics counted"
    ));
    let started = Instant::now();
    // The targets split over two threads (the machine's cores), each target on one thread.
    let halves: [Vec<Target>; 2] = [
        Target::ALL.iter().copied().step_by(2).collect(),
        Target::ALL.iter().copied().skip(1).step_by(2).collect(),
    ];
    let mut reports: Vec<(Report, f64)> = std::thread::scope(|scope| {
        let handles: Vec<_> = halves
            .iter()
            .map(|targets| {
                scope.spawn(move || {
                    targets
                        .iter()
                        .map(|&t| {
                            let at = Instant::now();
                            let report = feed(t, inputs, seed);
                            (report, at.elapsed().as_secs_f64())
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|_| fail("a fuzz thread panicked")))
            .collect()
    });
    reports.sort_by_key(|(r, _)| Target::ALL.iter().position(|t| *t == r.target));
    let mut panics = 0;
    for (r, secs) in &reports {
        println!(
            "RESULT fuzz parser={} inputs={} accepted={} rejected={} panics={} secs={secs:.1}",
            r.target.name(),
            r.inputs,
            r.accepted,
            r.inputs - r.accepted,
            r.panics
        );
        if let Some(input) = &r.first_panic {
            println!("  first panicking input of {}: {input:?}", r.target.name());
        }
        panics += r.panics;
    }
    println!(
        "RESULT fuzz parsers={} inputs_per_parser={inputs} panics={panics} secs={:.1}",
        reports.len(),
        started.elapsed().as_secs_f64()
    );
    if panics > 0 {
        fail(&format!("{panics} inputs panicked; see the inputs above"));
    }
}
