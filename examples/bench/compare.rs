//! `bench -- compare`: kit, the Python LangGraph reference and the Rust peers on the same
//! workloads, in the same session, and the ratio table the README shows.
//!
//! The Rust peers (graph-flow, adk-graph, rust-langgraph, langgraph-rs) are the team's
//! `bench/rust-peers/` program (found through `KIT_RUST_PEERS_BENCH`, else
//! `../shared/bench/rust-peers`), built once into `$CARGO_TARGET_DIR` or
//! `~/.cache/rust-peers-target` and run one workload and peer per process; the table shows the
//! best peer of each row. Without the program the peer columns say `—`.
//!
//! The reference scripts are the team's `bench/langgraph/` directory (found through
//! `KIT_LANGGRAPH_BENCH`, else `../shared/bench/langgraph` next to the repository). They run
//! with `KIT_BENCH_PYTHON` if set, else with a virtualenv made once under
//! `target/langgraph-venv` from the pinned `requirements-lock.txt`. When Python or the scripts
//! are not available, the table uses the reference figures recorded on 2026-11-21 on this kind
//! of machine, and says so.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// RESULT lines by name (e.g. `W1 invoke`): their `key=value` fields.
type Results = HashMap<String, HashMap<String, String>>;

/// Parses `RESULT <name words...> key=value ...` lines.
fn parse(output: &str, into: &mut Results) {
    for line in output.lines() {
        let Some(rest) = line.strip_prefix("RESULT ") else {
            continue;
        };
        let mut name = Vec::new();
        let mut fields = HashMap::new();
        for token in rest.split_whitespace() {
            match token.split_once('=') {
                Some((k, v)) if !name.is_empty() => {
                    fields.insert(k.to_string(), v.to_string());
                }
                _ => name.push(token),
            }
        }
        into.entry(name.join(" ")).or_default().extend(fields);
    }
}

fn run_and_capture(mut command: Command, label: &str) -> Option<String> {
    println!("## {label}");
    let output = command
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    for line in text.lines().filter(|l| l.starts_with("RESULT")) {
        println!("{line}");
    }
    if !output.status.success() {
        println!("# {label} failed ({})", output.status);
        return None;
    }
    Some(text)
}

fn anchor_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("KIT_LANGGRAPH_BENCH") {
        return Some(PathBuf::from(dir)).filter(|d| d.join("w1_linear.py").exists());
    }
    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guess = repo.join("../shared/bench/langgraph");
    guess.join("w1_linear.py").exists().then_some(guess)
}

/// A Python with the pinned LangGraph installed, set up once under `target/`.
fn anchor_python(dir: &Path) -> Option<PathBuf> {
    if let Ok(py) = std::env::var("KIT_BENCH_PYTHON") {
        return Some(PathBuf::from(py));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("target/langgraph-venv");
    let python = venv.join("bin/python");
    let ready = Command::new(&python)
        .args(["-c", "import langgraph, langchain"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ready {
        return Some(python);
    }
    println!(
        "# setting up {} with the pinned LangGraph (once)...",
        venv.display()
    );
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .is_ok_and(|s| s.success());
    let installed = made
        && Command::new(venv.join("bin/pip"))
            .args(["install", "-q", "-r"])
            .arg(dir.join("requirements-lock.txt"))
            .status()
            .is_ok_and(|s| s.success());
    installed.then_some(python)
}

/// The reference figures of 2026-11-21 (Python LangGraph 1.2.22, 2 shared cores), pass 1.
fn recorded() -> Results {
    let mut r = Results::new();
    parse(
        "RESULT W1 invoke per_node_step_median_us=108.21\n\
         RESULT W1 build+compile median_us=8102.2\n\
         RESULT W2 ainvoke_sequential per_round_median_us=1086.83 maxrss_mib=137.5\n\
         RESULT W3 invoke_static per_branch_median_us=119.31\n\
         RESULT W3 invoke_send per_branch_median_us=119.68\n\
         RESULT W4 summary runs_per_s_median=56.0 peak_maxrss_mib=294.2\n\
         RESULT W5 invoke_memory per_node_step_median_us=203.48\n\
         RESULT W5 invoke_sqlite-sync per_node_step_median_us=592.14\n\
         RESULT W5 invoke_sqlite-async per_node_step_median_us=528.64\n\
         RESULT W5 invoke_sqlite-exit per_node_step_median_us=124.11\n\
         RESULT W5 db_size_after_100_invokes bytes_per_invoke=938148\n\
         RESULT W6 time_to_first_event median_us=417.8\n\
         RESULT W6 stream_total per_event_median_us=105.67\n",
        &mut r,
    );
    r
}

/// One row: a label, where to read kit's and the anchor's figure, the unit, and whether more
/// is better (throughput) or less (time, memory, bytes).
struct Row {
    label: &'static str,
    kit: (&'static str, &'static str),
    anchor: (&'static str, &'static str),
    /// The Rust peers' RESULT names that measure the same (each followed by the peer's label),
    /// and the field; empty where no peer runs the workload.
    peers: (&'static [&'static str], &'static str),
    unit: &'static str,
    higher_is_better: bool,
}

const NO_PEER: (&[&str], &str) = (&[], "");

const ROWS: &[Row] = &[
    Row {
        label: "W1 100-node chain, per node step",
        kit: ("W1 invoke", "per_node_step_median_us"),
        anchor: ("W1 invoke", "per_node_step_median_us"),
        peers: (&["W1 invoke "], "per_node_step_median_us"),
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W1 build + compile",
        kit: ("W1 build+compile", "median_us"),
        anchor: ("W1 build+compile", "median_us"),
        peers: (&["W1 build+compile "], "median_us"),
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W2 agent loop, per round (model + tool)",
        kit: ("W2 ainvoke_sequential", "per_round_median_us"),
        anchor: ("W2 ainvoke_sequential", "per_round_median_us"),
        peers: (
            &["W2 ainvoke_sequential ", "W2 run "],
            "per_round_median_us",
        ),
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W3 fan-out 50 + join, per branch (static)",
        kit: ("W3 invoke_static", "per_branch_median_us"),
        anchor: ("W3 invoke_static", "per_branch_median_us"),
        peers: (&["W3 invoke_static "], "per_branch_median_us"),
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W3 fan-out 50 + join, per branch (Send)",
        kit: ("W3 invoke_send", "per_branch_median_us"),
        anchor: ("W3 invoke_send", "per_branch_median_us"),
        peers: NO_PEER,
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W4 1000 concurrent agent runs, throughput",
        kit: ("W4 summary", "runs_per_s_median"),
        anchor: ("W4 summary", "runs_per_s_median"),
        peers: NO_PEER,
        unit: "runs/s",
        higher_is_better: true,
    },
    Row {
        label: "W4 peak memory",
        kit: ("W4 summary", "peak_maxrss_mib"),
        anchor: ("W4 summary", "peak_maxrss_mib"),
        peers: NO_PEER,
        unit: "MiB",
        higher_is_better: false,
    },
    Row {
        label: "W5 checkpointed chain, per step (memory)",
        kit: ("W5 invoke_memory", "per_node_step_median_us"),
        anchor: ("W5 invoke_memory", "per_node_step_median_us"),
        peers: (&["W5 invoke_memory "], "per_node_step_median_us"),
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W5 per step (SQLite, sync)",
        kit: ("W5 invoke_sqlite-sync", "per_node_step_median_us"),
        anchor: ("W5 invoke_sqlite-sync", "per_node_step_median_us"),
        peers: (&["W5 invoke_sqlite-sync "], "per_node_step_median_us"),
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W5 per step (SQLite, async)",
        kit: ("W5 invoke_sqlite-async", "per_node_step_median_us"),
        anchor: ("W5 invoke_sqlite-async", "per_node_step_median_us"),
        peers: NO_PEER,
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W5 per step (SQLite, exit)",
        kit: ("W5 invoke_sqlite-exit", "per_node_step_median_us"),
        anchor: ("W5 invoke_sqlite-exit", "per_node_step_median_us"),
        peers: NO_PEER,
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W5 SQLite file per 100-step invoke",
        kit: ("W5 db_size_after_100_invokes", "bytes_per_invoke"),
        anchor: ("W5 db_size_after_100_invokes", "bytes_per_invoke"),
        peers: (&["W5 db_size_after_100_invokes "], "bytes_per_invoke"),
        unit: "bytes",
        higher_is_better: false,
    },
    Row {
        label: "W6 streaming, first event",
        kit: ("W6 first_event", "median_us"),
        anchor: ("W6 time_to_first_event", "median_us"),
        peers: NO_PEER,
        unit: "µs",
        higher_is_better: false,
    },
    Row {
        label: "W6 streaming, per event",
        kit: ("W6 100_events", "per_event_median_us"),
        anchor: ("W6 stream_total", "per_event_median_us"),
        peers: NO_PEER,
        unit: "µs",
        higher_is_better: false,
    },
];

fn peers_dir() -> Option<PathBuf> {
    if let Ok(dir) = std::env::var("KIT_RUST_PEERS_BENCH") {
        return Some(PathBuf::from(dir)).filter(|d| d.join("Cargo.toml").exists());
    }
    let guess = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/bench/rust-peers");
    guess.join("Cargo.toml").exists().then_some(guess)
}

const PEERS: &[&str] = &["graph-flow", "adk-graph", "rust-langgraph", "langgraph-rs"];

/// Builds the Rust peers' benchmark and runs each workload for each peer (multi-thread tokio
/// runtime, as kit's workloads run); their RESULT lines, by name.
fn run_peers(workloads: &[&str]) -> Results {
    let mut results = Results::new();
    let Some(dir) = peers_dir() else {
        println!("# Rust peers not run: no bench/rust-peers at KIT_RUST_PEERS_BENCH or ../shared");
        return results;
    };
    let target = std::env::var_os("RUST_PEERS_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/rust-peers-target"))
        })
        .unwrap_or_else(|| std::env::temp_dir().join("rust-peers-target"));
    println!(
        "# building the Rust peers' benchmark in {} (once)...",
        target.display()
    );
    let built = Command::new("cargo")
        .args(["build", "--release", "-q"])
        .current_dir(&dir)
        .env("CARGO_TARGET_DIR", &target)
        .status()
        .is_ok_and(|s| s.success());
    if !built {
        println!("# Rust peers not run: their benchmark did not build");
        return results;
    }
    let bin = target.join("release/rust-peers");
    for w in workloads
        .iter()
        .filter(|w| ["w1", "w2", "w3", "w5"].contains(w))
    {
        for peer in PEERS {
            // A peer that hangs or takes minutes must not hold the table up.
            let mut command = Command::new("timeout");
            command.arg("600").arg(&bin).args([*w, *peer]);
            if let Some(out) = run_and_capture(command, &format!("{peer} {w}")) {
                parse(&out, &mut results);
            }
        }
    }
    results
}

/// The best peer figure of a row, with the peer's name.
fn best_peer(peers: &Results, row: &Row) -> Option<(f64, String)> {
    let (names, field) = row.peers;
    peers
        .iter()
        .filter_map(|(name, fields)| {
            let label = names.iter().find_map(|prefix| name.strip_prefix(prefix))?;
            let v: f64 = fields.get(field)?.parse().ok()?;
            let peer = label.split('(').next().unwrap_or(label).trim().to_string();
            (v > 0.0).then_some((v, peer))
        })
        .min_by(|a, b| {
            let order = a.0.total_cmp(&b.0);
            if row.higher_is_better {
                order.reverse()
            } else {
                order
            }
        })
}

/// `k` against `other` as "N× faster" (or higher, or smaller).
fn ratio(row: &Row, k: f64, other: f64) -> String {
    let r = if row.higher_is_better {
        k / other
    } else {
        other / k
    };
    let word = if row.higher_is_better {
        "higher"
    } else if row.unit == "µs" {
        "faster"
    } else {
        "smaller"
    };
    format!("{}× {word}", fmt(r))
}

fn value(results: &Results, (name, field): (&str, &str)) -> Option<f64> {
    results.get(name)?.get(field)?.parse().ok()
}

fn fmt(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Runs kit's workloads (and the anchor's, when possible) and prints the ratio table.
pub fn run(exe: &Path, workloads: &[&str]) {
    let mut kit = Results::new();
    for w in workloads {
        let mut command = Command::new(exe);
        command.arg(w);
        if let Some(out) = run_and_capture(command, &format!("kit {w}")) {
            parse(&out, &mut kit);
        }
    }
    let skip_anchor = std::env::args().any(|a| a == "--recorded");
    let mut source = "recorded on 2026-11-21 (Python LangGraph 1.2.22, this kind of machine)";
    let mut anchor = Results::new();
    let live = (!skip_anchor)
        .then(anchor_dir)
        .flatten()
        .and_then(|dir| anchor_python(&dir).map(|py| (dir, py)));
    match live {
        Some((dir, python)) => {
            for script in [
                "w1_linear",
                "w2_agent",
                "w3_fanout",
                "w4_concurrency",
                "w5_sqlite",
                "w6_stream",
            ] {
                let mut command = Command::new(&python);
                command.arg(format!("{script}.py")).current_dir(&dir);
                if let Some(out) = run_and_capture(command, &format!("LangGraph {script}")) {
                    parse(&out, &mut anchor);
                }
            }
            source = "measured now, in this session (Python LangGraph from requirements-lock.txt)";
        }
        None => {
            println!(
                "# Python LangGraph reference not run (no scripts at KIT_LANGGRAPH_BENCH or \
                 ../shared/bench/langgraph, no Python, or --recorded): using recorded figures"
            );
        }
    }
    let peers = if std::env::args().any(|a| a == "--no-peers") {
        Results::new()
    } else {
        run_peers(workloads)
    };
    let recorded = recorded();
    println!("\n## kit vs Python LangGraph and the best Rust peer — anchor figures {source}\n");
    println!("| workload | kit | LangGraph | kit is | best Rust peer | kit is |");
    println!("|---|---|---|---|---|---|");
    for row in ROWS {
        let Some(k) = value(&kit, row.kit) else {
            continue;
        };
        let a = value(&anchor, row.anchor).or_else(|| value(&recorded, row.anchor));
        let (a_text, a_ratio) = match a {
            Some(a) if k > 0.0 && a > 0.0 => (format!("{} {}", fmt(a), row.unit), ratio(row, k, a)),
            _ => ("—".to_string(), "—".to_string()),
        };
        let (p_text, p_ratio) = match best_peer(&peers, row) {
            Some((p, name)) if k > 0.0 => (
                format!("{} {} ({name})", fmt(p), row.unit),
                ratio(row, k, p),
            ),
            _ => ("—".to_string(), "—".to_string()),
        };
        println!(
            "| {} | {} {} | {a_text} | {a_ratio} | {p_text} | {p_ratio} |",
            row.label,
            fmt(k),
            row.unit,
        );
    }
}
