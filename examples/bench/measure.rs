//! Measuring: timing repetitions, medians and p95, peak RSS, the RESULT lines.

use std::time::Instant;

pub(crate) fn proc_status_kib(field: &str) -> f64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    for line in s.lines() {
        if let Some(rest) = line.strip_prefix(field) {
            let v: String = rest.chars().filter(|c| c.is_ascii_digit()).collect();
            return v.parse::<f64>().unwrap_or(f64::NAN);
        }
    }
    f64::NAN
}

/// Peak resident set size so far (VmHWM, the same figure as `ru_maxrss`), MiB.
pub(crate) fn maxrss_mib() -> f64 {
    proc_status_kib("VmHWM:") / 1024.0
}

pub(crate) struct Stats {
    pub(crate) n: usize,
    pub(crate) median: f64,
    pub(crate) p95: f64,
    pub(crate) min: f64,
    pub(crate) mean: f64,
}

pub(crate) fn stats(mut us: Vec<f64>) -> Stats {
    us.sort_by(|a, b| a.total_cmp(b));
    let n = us.len();
    let median = if n % 2 == 1 {
        us[n / 2]
    } else {
        (us[n / 2 - 1] + us[n / 2]) / 2.0
    };
    let k = ((0.95 * n as f64).ceil() as usize).clamp(1, n) - 1;
    Stats {
        n,
        median,
        p95: us[k],
        min: us[0],
        mean: us.iter().sum::<f64>() / n as f64,
    }
}

pub(crate) fn report(name: &str, s: &Stats, per: &[(&str, f64)]) {
    let mut line = format!(
        "RESULT {name} n={} median_us={:.1} p95_us={:.1} min_us={:.1} mean_us={:.1}",
        s.n, s.median, s.p95, s.min, s.mean
    );
    for (label, divisor) in per {
        line.push_str(&format!(
            " per_{label}_median_us={:.3} per_{label}_p95_us={:.3}",
            s.median / divisor,
            s.p95 / divisor
        ));
    }
    line.push_str(&format!(" maxrss_mib={:.1}", maxrss_mib()));
    println!("{line}");
}

pub(crate) fn header(title: &str) {
    println!("# {title}");
    println!(
        "# kit {} (rustc release, lto=thin) on {}, {} cpus, runtime: tokio current_thread",
        env!("CARGO_PKG_VERSION"),
        std::env::consts::ARCH,
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(0)
    );
    println!("# maxrss after startup: {:.1} MiB", maxrss_mib());
}

pub(crate) async fn time_async<F, Fut>(warmup: usize, reps: usize, mut f: F) -> Vec<f64>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for _ in 0..warmup {
        f().await;
    }
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t = Instant::now();
        f().await;
        out.push(t.elapsed().as_secs_f64() * 1e6);
    }
    out
}

/// Clock ticks per second of `/proc/*/stat` times: the kernel's USER_HZ, 100 on every
/// Linux architecture the program runs on (what `getconf CLK_TCK` prints).
const TICKS_PER_S: f64 = 100.0;

/// utime + stime of process `pid`, in seconds.
pub(crate) fn cpu_s(pid: u32) -> f64 {
    stat_cpu_s(&std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default())
}

/// utime + stime of this process's threads named `name`, in seconds.
pub(crate) fn thread_cpu_s(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    tasks
        .flatten()
        .filter(|task| {
            std::fs::read_to_string(task.path().join("comm"))
                .is_ok_and(|comm| comm.trim_end() == name)
        })
        .map(|task| {
            stat_cpu_s(&std::fs::read_to_string(task.path().join("stat")).unwrap_or_default())
        })
        .sum()
}

/// utime + stime of a `/proc/…/stat` line, in seconds.
fn stat_cpu_s(stat: &str) -> f64 {
    // The command name may hold spaces: fields start after the last `)`.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state); utime and stime are fields 14 and 15.
    let utime: f64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    let stime: f64 = fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    (utime + stime) / TICKS_PER_S
}

// ---------------------------------------------------------------------------------------------
// W1: linear chain of 100 nodes
