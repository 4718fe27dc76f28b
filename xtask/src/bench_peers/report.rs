//! The figures of a bench-peers run: medians and spreads, the fitted cost of one call and
//! the cold start, the tables printed for a person and the JSON written beside them.

use serde_json::json;

use super::{Options, Row, System, Usage};

pub(super) fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// How far a point's runs spread, for the progress line beside their median: " (runs
/// 0.034–0.041 s)", or nothing for one run. `values` sorted ([`median`] sorts them).
pub(super) fn spread(values: &[f64]) -> String {
    match values {
        [first, .., last] => format!(" (runs {first:.3}–{last:.3} s)"),
        _ => String::new(),
    }
}

/// Least-squares line through `(n, cpu)`: (seconds per call, seconds at zero calls).
pub(super) fn fit(points: &[(u64, f64, u64)]) -> (f64, f64) {
    let k = points.len() as f64;
    if points.len() < 2 {
        let (n, cpu, _) = points[0];
        return (cpu / (n + 1) as f64, 0.0);
    }
    let mx = points.iter().map(|p| p.0 as f64).sum::<f64>() / k;
    let my = points.iter().map(|p| p.1).sum::<f64>() / k;
    let sxy: f64 = points.iter().map(|p| (p.0 as f64 - mx) * (p.1 - my)).sum();
    let sxx: f64 = points.iter().map(|p| (p.0 as f64 - mx).powi(2)).sum();
    let slope = if sxx > 0.0 { sxy / sxx } else { 0.0 };
    (slope, my - slope * mx)
}

/// The cold start: CPU at the smallest N less that N's calls at the first segment's slope
/// (the least-squares intercept goes negative when the cost per call grows with N).
pub(super) fn cold_start(points: &[(u64, f64, u64)]) -> f64 {
    let slope = segment_slopes(points)
        .first()
        .map_or_else(|| fit(points).0, |s| s.2);
    let (n, cpu, _) = points[0];
    (cpu - n as f64 * slope).max(0.0)
}

/// CPU per call between two neighbouring N (how the cost grows with the history).
pub(super) fn segment_slopes(points: &[(u64, f64, u64)]) -> Vec<(u64, u64, f64)> {
    points
        .windows(2)
        .map(|w| (w[0].0, w[1].0, (w[1].1 - w[0].1) / (w[1].0 - w[0].0) as f64))
        .collect()
}

pub(super) fn print_tables(rows: &[Row], concurrent: &[(System, Usage)], opts: &Options) {
    let lsm_slope = rows
        .iter()
        .find(|r| r.system == System::Lsm)
        .map(|r| fit(&r.points).0);
    let mut header = "| system |".to_string();
    let mut rule = "|---|".to_string();
    for n in &opts.calls {
        header.push_str(&format!(" N = {n}: CPU, peak RSS |"));
        rule.push_str("---|");
    }
    header.push_str(" CPU per call | between N | cold start | per call vs lsm |");
    rule.push_str("---|---|---|---|");
    println!("{header}\n{rule}");
    for row in rows {
        let (slope, _) = fit(&row.points);
        let intercept = cold_start(&row.points);
        let mut line = format!("| {} |", row.system.name());
        for (_, cpu, rss) in &row.points {
            if row.system.is_floor() {
                line.push_str(&format!(" {cpu:.3} s, – |"));
            } else {
                line.push_str(&format!(" {cpu:.3} s, {} MB |", rss / 1024));
            }
        }
        let segments: Vec<String> = segment_slopes(&row.points)
            .iter()
            .map(|(a, b, s)| format!("{a}→{b}: {:.0} µs", s * 1e6))
            .collect();
        let ratio = lsm_slope
            .filter(|s| *s > 0.0)
            .map_or("–".to_string(), |s| format!("{:.1}×", slope / s));
        line.push_str(&format!(
            " {:.0} µs | {} | {:.3} s | {ratio} |",
            slope * 1e6,
            segments.join(", "),
            intercept
        ));
        println!("{line}");
    }
    if let Some(note) = noise_note(rows) {
        println!("\n{note}");
    }
    for (floor, what) in [
        (System::BareExchange, "the bare exchange of its bodies"),
        (System::BareSocket, "the same over a blocking socket"),
    ] {
        if let Some((own, lsm, floor)) = harness_own(rows, floor) {
            println!(
                "\nlsm's own CPU per call, above {what}: {:.0} µs ({:.0} µs − {:.0} µs).",
                own * 1e6,
                lsm * 1e6,
                floor * 1e6
            );
        }
    }
    if !concurrent.is_empty() {
        let lsm = concurrent
            .iter()
            .find(|(s, _)| *s == System::Lsm)
            .map(|(_, u)| u.cpu_s);
        println!(
            "\n| {} agents × {} calls, one process | CPU | peak RSS | CPU vs lsm |\n|---|---|---|---|",
            opts.agents, opts.agent_calls
        );
        for (system, used) in concurrent {
            let ratio = lsm
                .filter(|l| *l > 0.0)
                .map_or("–".to_string(), |l| format!("{:.1}×", used.cpu_s / l));
            println!(
                "| {} | {:.3} s | {} MB | {ratio} |",
                system.name(),
                used.cpu_s,
                used.max_rss_kb / 1024
            );
        }
    }
}

/// What to say when a row's CPU per call came out zero or negative: its runs at different N
/// differ by less than the runs vary, so the figure measures the noise, not a call.
pub(super) fn noise_note(rows: &[Row]) -> Option<String> {
    let noisy: Vec<&str> = rows
        .iter()
        .filter(|r| r.points.len() > 1 && fit(&r.points).0 <= 0.0)
        .map(|r| r.system.name())
        .collect();
    (!noisy.is_empty()).then(|| {
        format!(
            "note: the CPU per call of {} came out ≤ 0: between these N its runs differ by \
             less than they vary from run to run, so the figure is noise, not the cost of a \
             call. Measure with N farther apart (e.g. --calls 10,200) or with more --runs.",
            noisy.join(", ")
        )
    })
}

/// `lsm`'s CPU per call less the `floor` row's, with both: (own, lsm, floor) in seconds.
pub(super) fn harness_own(rows: &[Row], floor: System) -> Option<(f64, f64, f64)> {
    own_above(rows, System::Lsm, floor)
}

/// `system`'s cost per call (the slope of its row) less the `floor` row's, with both:
/// (own, system's, floor's), in the rows' unit (seconds, or instructions).
pub(super) fn own_above(rows: &[Row], system: System, floor: System) -> Option<(f64, f64, f64)> {
    let slope_of = |system| {
        rows.iter()
            .find(|r| r.system == system)
            .map(|r| fit(&r.points).0)
    };
    let cost = slope_of(system)?;
    let floor = slope_of(floor)?;
    Some((cost - floor, cost, floor))
}

pub(super) fn to_json(
    rows: &[Row],
    concurrent: &[(System, Usage)],
    opts: &Options,
) -> serde_json::Value {
    let sequential: Vec<_> = rows
        .iter()
        .map(|r| {
            let (slope, _) = fit(&r.points);
            let intercept = cold_start(&r.points);
            json!({
                "system": r.system.name(),
                "points": r.points.iter().map(|(n, cpu, rss)| json!({
                    "calls": n, "cpu_s": cpu,
                    "max_rss_kb": (!r.system.is_floor()).then_some(rss),
                })).collect::<Vec<_>>(),
                "cpu_per_call_us": slope * 1e6,
                "cold_start_cpu_s": intercept,
            })
        })
        .collect();
    let concurrent: Vec<_> = concurrent
        .iter()
        .map(|(s, u)| json!({"system": s.name(), "cpu_s": u.cpu_s, "max_rss_kb": u.max_rss_kb}))
        .collect();
    json!({
        "runs_per_point": opts.runs,
        "file_bytes": opts.file_bytes,
        "lsm_own_cpu_per_call_us": harness_own(rows, System::BareExchange).map(|(own, _, _)| own * 1e6),
        "lsm_own_cpu_per_call_above_socket_us":
            harness_own(rows, System::BareSocket).map(|(own, _, _)| own * 1e6),
        "sequential": sequential,
        "concurrent": {"agents": opts.agents, "calls": opts.agent_calls, "results": concurrent},
    })
}
