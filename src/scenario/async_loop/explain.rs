//! What `async`'s figures say beside the timed loops: the "timing without synchronization"
//! pitfall where it misleads most, on a few large matrix products (each sentence chosen by the
//! lesson's own finding, [`reads_too_little`]); the dependent chain against the independent
//! async ops and what the book's phases mean on a GPU; the ping-pong hand-offs; async's cost
//! per op beside the machine's limits, which `async` reads ([`crate::machine::limits()`]) and
//! does not measure; and the lesson of §8.2 with the book's figures beside the run's:
//! asynchronous execution beats waiting after every op, and a clock that does not wait reads
//! far too little on real work.

use super::{
    median_of, per_op, Timed, CHAIN_OVER_ASYNC_RATIO, CHAIN_PER_OP_S, HANDOFF_P50_S, HANDOFF_P99_S,
    PING_PONG_PER_OP_S, PRODUCTS_OVER_PUSH_ONLY_RATIO,
};
use crate::device::GpuOrder;
use crate::harness::stats::quantile;
use crate::machine::Limits;
use crate::report::evidence::{Estimate, Ratio, Side};
use crate::report::finding::{Finding, Want};
use crate::report::{BookFigure, RunRecord};
use crate::scenario::book::{A_GPU, NUMPY_PRODUCTS as NUMPY, PYTORCH_ASYNC, TF2_ASYNC};
use crate::scenario::kit::{LessonSpec, Verdict, ALREADY_TRACING};
use crate::units::{human_percent, human_time, significant};

pub(super) const LESSON: LessonSpec = LessonSpec {
    source: TF2_ASYNC,
    claim: "async is faster than sync (sync / async wholly above 1), and a clock stopped \
            without waiting reads far too little on real work (products / products-push-only \
            wholly above 2)",
};

/// How many times too little the push-only clock must read on the products to count as "far
/// too little": below half the true time.
const FAR_TOO_LITTLE: f64 = 2.0;

const TF2_SYNC: BookFigure =
    BookFigure::seconds("synchronous: 1000 × y = x + 1", 3.5589, TF2_ASYNC, None).per(1000);
const TF2_ASYNC_LOOP: BookFigure = BookFigure::seconds(
    "asynchronous (tf.function): 1000 × y = x + 1",
    1.0457,
    TF2_ASYNC,
    None,
)
.per(1000);
const TORCH_UNSYNCED: BookFigure = BookFigure::seconds(
    "torch on a GPU: 10 × (randn + product) of 1000², without synchronize",
    0.0010,
    PYTORCH_ASYNC,
    A_GPU,
)
.products(10, 1000);
const TORCH_SYNCED: BookFigure = BookFigure::seconds(
    "torch on a GPU: 10 × (randn + product) of 1000², with torch.cuda.synchronize",
    0.0020,
    PYTORCH_ASYNC,
    A_GPU,
)
.products(10, 1000);

/// The figures §8.2 prints, in both editions that print any.
pub(super) const BOOK: &[BookFigure] = &[
    TF2_SYNC,
    TF2_ASYNC_LOOP,
    NUMPY,
    TORCH_UNSYNCED,
    TORCH_SYNCED,
];

/// The lesson's second criterion, which the pitfall's sentence is chosen by too: how many
/// times too little the `pushed` variant's clock reads on `true_time`'s work.
pub(super) fn reads_too_little(run: &RunRecord, true_time: Timed, pushed: Timed) -> Finding {
    let figure = format!("{} / {}", true_time.name(), pushed.name());
    let e = |v: Timed| Estimate::of(run, v.name());
    let r = Ratio::of(e(true_time), e(pushed));
    Finding::criterion(&figure, r, FAR_TOO_LITTLE, Want::Above)
}

/// Decide the lesson from the run's medians and record it with the book's figures.
pub(super) fn conclude(run: &mut RunRecord, n: u64, products: u64, size: usize) {
    let e = |v: Timed| Estimate::of(run, v.name());
    let speedup = Ratio::of(e(Timed::Sync), e(Timed::Async));
    let products_pitfall = reads_too_little(run, Timed::Products, Timed::ProductsPushOnly);
    let too_little = products_pitfall.ratio().unwrap_or(Ratio::exact(f64::NAN));
    let here = format!(
        "{} vs {} ({n} ops), {:.1}×; push-only reads {}",
        human_time(e(Timed::Sync).median),
        human_time(e(Timed::Async).median),
        speedup.value,
        match too_little.value {
            v if v >= FAR_TOO_LITTLE => format!("{}× too little", significant(v)),
            v => format!("{} of the products' time", human_percent(1.0 / v)),
        },
    );
    let book = format!(
        "{}: {} sync vs {} async, {:.1}× (its Python front end; here {n} ops from Rust); {}: {} \
         without sync vs {} with, {:.1}× too little (a GPU; here {products} products of {size}² \
         on this device)",
        TF2_ASYNC.cite(),
        TF2_SYNC.printed(),
        TF2_ASYNC_LOOP.printed(),
        TF2_SYNC.value / TF2_ASYNC_LOOP.value,
        PYTORCH_ASYNC.cite(),
        TORCH_UNSYNCED.printed(),
        TORCH_SYNCED.printed(),
        TORCH_SYNCED.value / TORCH_UNSYNCED.value,
    );
    let findings = vec![Finding::faster("sync / async", speedup), products_pitfall];
    LESSON.conclude(run, BOOK, Verdict::new(findings, here).beside(book));
}

/// How far the products' push-only clock reads below their true time, next to the same gap
/// for `y = x + 1`: the pitfall is large where computing dominates pushing.
pub(super) fn derive_pitfall(run: &mut RunRecord, products: u64, size: usize) {
    let e = |v: Timed| Estimate::of(run, v.name());
    let (true_time, pushed) = (e(Timed::Products), e(Timed::ProductsPushOnly));
    let (tiny_true, tiny_pushed) = (e(Timed::Async), e(Timed::PushOnly));
    let big = reads_too_little(run, Timed::Products, Timed::ProductsPushOnly);
    let tiny = reads_too_little(run, Timed::Async, Timed::PushOnly);
    let ratio = true_time.median / pushed.median;
    run.record(PRODUCTS_OVER_PUSH_ONLY_RATIO, ratio);
    let lead = format!(
        "the pitfall on the book's workload: pushing {products} products of {size}×{size} took {} \
         (products-push-only), computing them took {} (products)",
        human_time(pushed.median),
        human_time(true_time.median),
    );
    let products_said = match big.side() {
        Side::Above => {
            format!(
                "{lead}: a clock stopped without waiting reads {}× too little.",
                significant(ratio)
            )
        }
        Side::Below => format!(
            "{lead}: a clock stopped without waiting read {} of the true time here, not far \
             too little: each push returned only once its product was done (an engine that runs \
             each op as it is pushed, or a device that blocks).",
            human_percent(1.0 / ratio)
        ),
        Side::Within | Side::Unknown => format!(
            "{lead} ({}): whether the clock reads far too little is not decided here.",
            big.evidence()
        ),
    };
    // async / push-only: how many times too little the push-only clock reads.
    let tiny_ratio = tiny_true.median / tiny_pushed.median;
    let tiny_said = match tiny.side() {
        Side::Below => format!(
            "For y = x + 1 push-only ({}) reads {} of async's time ({}), not far too little, \
             so the same mistake goes unnoticed there.",
            human_time(tiny_pushed.median),
            human_percent(1.0 / tiny_ratio),
            human_time(tiny_true.median),
        ),
        Side::Above => format!(
            "At this --shape computing dominates y = x + 1 too: push-only ({}) reads {}× too \
             little against async ({}), the same mistake as on the products.",
            human_time(tiny_pushed.median),
            significant(tiny_ratio),
            human_time(tiny_true.median),
        ),
        Side::Within | Side::Unknown => format!(
            "For y = x + 1, push-only ({}) against async ({}): {}.",
            human_time(tiny_pushed.median),
            human_time(tiny_true.median),
            tiny.evidence()
        ),
    };
    run.explanation.push(format!("{products_said} {tiny_said}"));
}

/// The dependent chain against independent ops, and what the phases mean on a GPU.
pub(super) fn derive_chain(run: &mut RunRecord, gpu_order: Option<GpuOrder>, n: u64) {
    let chain = median_of(run, Timed::Chain);
    let async_time = median_of(run, Timed::Async);
    let ratio = chain / async_time;
    run.record(CHAIN_PER_OP_S, chain / n as f64);
    run.record(CHAIN_OVER_ASYNC_RATIO, ratio);
    let e = &mut run.explanation;
    e.push(format!(
        "a chain of {n} dependent ops (each reads the previous y) took {} per op, {ratio:.2}× the independent \
         async ops: {}.",
        human_time(chain / n as f64),
        match gpu_order {
            Some(GpuOrder::Stream) => {
                "on the GPU a dependent kernel is enqueued right behind its producer and the stream keeps \
                 them in order (--gpu-order stream), so the order costs no host round trip"
            }
            Some(GpuOrder::Host) => {
                "the engine waits for the GPU to finish each producer before the next op is enqueued \
                 (--gpu-order host): a host round trip per op"
            }
            None => "each op can only start once its producer has finished, so the engine hands the chain from op to op",
        }
    ));
    if gpu_order == Some(GpuOrder::Stream) {
        e.push(
            "on the GPU in stream order, t2 is the time to enqueue the kernel on the compute lane; the GPU's own work and \
             the event that reports it fall into t3."
                .into(),
        );
    }
}

/// The hand-off figures and their sentence.
pub(super) fn derive_handoffs(run: &mut RunRecord, n: u64, hops: &[f64]) {
    let ping_pong = per_op(run, Timed::PingPong, n);
    run.record(PING_PONG_PER_OP_S, ping_pong);
    if hops.is_empty() {
        let why = if n < 2 {
            "a chain of one op has no hop"
        } else {
            ALREADY_TRACING
        };
        run.unmeasured(HANDOFF_P50_S, why);
        run.unmeasured(HANDOFF_P99_S, why);
        return;
    }
    let (p50, p99) = (quantile(hops, 0.5), quantile(hops, 0.99));
    run.record(HANDOFF_P50_S, p50);
    run.record(HANDOFF_P99_S, p99);
    run.explanation_detail.push(format!(
        "ping-pong: {n} dependent ops alternating between two CPU lanes took {} per op; from \
         one lane's op ending to the next starting on the other lane took {} (median hop) and \
         {} at the 99th percentile, in a traced chain of {} ops: what a multi-device step pays \
         each time it crosses devices.",
        human_time(ping_pong),
        human_time(p50),
        human_time(p99),
        hops.len() + 1
    ));
}

/// The sentence that sets async's cost per op against the limits measured (none where neither
/// was, as in a debug build).
pub(super) fn derive_against_limits(run: &mut RunRecord, n: u64, limits: &Limits) {
    let usable = |s: f64| (s.is_finite() && s > 0.0).then_some(s);
    let line = limits.line.measured().and_then(|l| usable(l.one_way_s));
    let channel = limits.channel.measured().and_then(|c| usable(c.per_op_s));
    let async_time = per_op(run, Timed::Async, n);
    let mut parts = Vec::new();
    if let Some(line) = line {
        parts.push(format!(
            "{:.1}× a cache line's trip between two cores ({} one way): an op moves several \
             lines between the pushing thread and the worker",
            async_time / line,
            human_time(line),
        ));
    }
    if let Some(channel) = channel {
        parts.push(format!(
            "{:.2}× a closure handed to another thread through a channel, with no engine ({} \
             each): a reference, not a bound, as an engine may batch where the channel does not",
            async_time / channel,
            human_time(channel),
        ));
    }
    if parts.is_empty() || !async_time.is_finite() {
        return;
    }
    run.explanation_detail.push(format!(
        "against this machine's limits, measured once at the start of the process (`parbench \
         devices --probe`): async's {} per op is {}. On a VM the host changes the cache line's \
         latency from minute to minute, so compare two runs' per-op figures beside their \
         reports' limits.",
        human_time(async_time),
        parts.join("; "),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::harness::stats::Summary;
    use crate::machine::{ChannelHandoff, LineLatency, Probe};
    use crate::report::{Held, Lesson};
    use serde_json::Map;

    fn run_with(medians: &[(Timed, f64)]) -> RunRecord {
        let mut run = RunRecord::new("async", Map::new(), vec![]);
        for (v, m) in medians {
            let s =
                Summary::from_samples(&[*m * 0.99, *m, *m * 1.01, *m, *m, *m]).expect("samples");
            run.add_variants(vec![v.name().to_string()], vec![s], [None]);
        }
        run
    }

    /// A run of 1000 loop ops and 10 products of 1000², concluded: its lesson.
    fn concluded(sync: f64, async_time: f64, products_pushed: f64) -> (RunRecord, Lesson) {
        let mut run = run_with(&[
            (Timed::Sync, sync),
            (Timed::Async, async_time),
            (Timed::Products, 0.2),
            (Timed::ProductsPushOnly, products_pushed),
        ]);
        conclude(&mut run, 1000, 10, 1000);
        let lesson = run.lesson.clone().expect("a lesson");
        (run, lesson)
    }

    #[test]
    fn a_clear_run_holds_and_an_indistinguishable_one_is_inconclusive() {
        let (clear, lesson) = concluded(1.3e-3, 2.3e-4, 1e-5);
        assert_eq!(lesson.held, Held::Yes, "{lesson:?}");
        assert_eq!(lesson.book.as_deref(), Some("TF 2 edition, §8.2: 3.5589 s sync vs 1.0457 s async, 3.4× (its Python front end; here 1000 ops from Rust); PyTorch edition, asynchronous computation: 0.0010 s without sync vs 0.0020 s with, 2.0× too little (a GPU; here 10 products of 1000² on this device)"));
        assert_eq!(clear.book.len(), BOOK.len());
        // Far too little as a factor, never "0.0% of the products' time".
        assert_eq!(
            lesson.here,
            "1.300 ms vs 230.0 µs (1000 ops), 5.7×; push-only reads 20,000× too little"
        );

        assert_eq!(concluded(1.0e-3, 1.0e-3, 1e-5).1.held, Held::Inconclusive);
        // A naive engine: push-only reads the products' whole time.
        assert_eq!(
            concluded(1.0e-3, 1.0e-3, 0.199).1.here,
            "1.000 ms vs 1.000 ms (1000 ops), 1.0×; push-only reads 100% of the products' time"
        );
    }

    /// The pitfall's sentences for 10 products of 1000² and the loops of y = x + 1.
    fn said(products: f64, products_pushed: f64, async_time: f64, pushed: f64) -> String {
        let mut run = run_with(&[
            (Timed::Products, products),
            (Timed::ProductsPushOnly, products_pushed),
            (Timed::Async, async_time),
            (Timed::PushOnly, pushed),
        ]);
        derive_pitfall(&mut run, 10, 1000);
        run.explanation.join(" ")
    }

    /// Each sentence says what its own figures show, word for word (golden): the defaults'
    /// "goes unnoticed"; `--shape 1000x1000`, where push-only reads far too little on
    /// y = x + 1 as well (once "0.00× async"); and the naive engine, where each push waits for
    /// its op (once "reads 1× too little").
    #[test]
    fn the_pitfall_sentence_is_chosen_by_its_figures() {
        assert_eq!(said(0.2, 1e-4, 300e-6, 250e-6), "the pitfall on the book's workload: pushing 10 products of 1000×1000 took 100.0 µs (products-push-only), computing them took 200.0 ms (products): a clock stopped without waiting reads 2,000× too little. For y = x + 1 push-only (250.0 µs) reads 83% of async's time (300.0 µs), not far too little, so the same mistake goes unnoticed there.");
        assert_eq!(said(0.2, 1e-4, 294.8e-3, 217.0e-6), "the pitfall on the book's workload: pushing 10 products of 1000×1000 took 100.0 µs (products-push-only), computing them took 200.0 ms (products): a clock stopped without waiting reads 2,000× too little. At this --shape computing dominates y = x + 1 too: push-only (217.0 µs) reads 1,359× too little against async (294.8 ms), the same mistake as on the products.");
        assert_eq!(said(100.9e-3, 100.4e-3, 875.4e-6, 862.8e-6), "the pitfall on the book's workload: pushing 10 products of 1000×1000 took 100.4 ms (products-push-only), computing them took 100.9 ms (products): a clock stopped without waiting read 100% of the true time here, not far too little: each push returned only once its product was done (an engine that runs each op as it is pushed, or a device that blocks). For y = x + 1 push-only (862.8 µs) reads 99% of async's time (875.4 µs), not far too little, so the same mistake goes unnoticed there.");
    }

    /// A run whose async variant took 1 ms for 1000 ops (1 µs per op).
    fn run_with_async() -> RunRecord {
        run_with(&[(Timed::Async, 1e-3)])
    }

    #[test]
    fn async_is_quoted_against_the_limits_measured_and_records_no_figure() {
        let mut limits = Limits::not_measured("test");
        limits.line = Probe::Measured(LineLatency {
            one_way_s: 200e-9,
            method: String::new(),
        });
        limits.channel = Probe::Measured(ChannelHandoff {
            per_op_s: 400e-9,
            method: String::new(),
        });
        let mut run = run_with_async();
        derive_against_limits(&mut run, 1000, &limits);
        assert_eq!(run.explanation_detail.join("\n"), "against this machine's limits, measured once at the start of the process (`parbench devices --probe`): async's 1.000 µs per op is 5.0× a cache line's trip between two cores (200.0 ns one way): an op moves several lines between the pushing thread and the worker; 2.50× a closure handed to another thread through a channel, with no engine (400.0 ns each): a reference, not a bound, as an engine may batch where the channel does not. On a VM the host changes the cache line's latency from minute to minute, so compare two runs' per-op figures beside their reports' limits.");
        assert!(run.derived.is_empty(), "{:?}", run.derived);

        // Only the line measured (the channel probe failed): only the line is quoted.
        limits.channel = Probe::NotMeasured("the channel probe failed".into());
        let mut run = run_with_async();
        derive_against_limits(&mut run, 1000, &limits);
        assert_eq!(run.explanation_detail.join("\n"), "against this machine's limits, measured once at the start of the process (`parbench devices --probe`): async's 1.000 µs per op is 5.0× a cache line's trip between two cores (200.0 ns one way): an op moves several lines between the pushing thread and the worker. On a VM the host changes the cache line's latency from minute to minute, so compare two runs' per-op figures beside their reports' limits.");

        // A debug build measures no limit: no sentence.
        let mut run = run_with_async();
        derive_against_limits(&mut run, 1000, &Limits::not_measured("debug build"));
        assert!(
            run.explanation_detail.is_empty(),
            "{:?}",
            run.explanation_detail
        );
    }
}
