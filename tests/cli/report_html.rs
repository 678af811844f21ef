//! `report` and `--html`: self-contained XHTML pages of runs, comparisons and sweeps.

use serde_json::Value;

use crate::cli::util::{assert_usage_error, parbench, TWO_AXIS_SWEEP};
use crate::common::QUICK;

/// An HTML page parsed as XML (it is written XHTML-compatible): every element closed, only
/// XML's entities. Panics with the parser's reason otherwise.
fn parse_page(html: &str) -> roxmltree::Document<'_> {
    roxmltree::Document::parse_with_options(
        html,
        roxmltree::ParsingOptions {
            allow_dtd: true,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("the page is not well-formed: {e}"))
}

/// The page loads nothing: no script, no `src=`, no stylesheet or font from elsewhere, and the
/// only URLs are the XHTML and SVG namespace names.
fn assert_self_contained(html: &str) {
    for needle in ["<script", "src=", "<link", "@import", "url("] {
        assert!(!html.contains(needle), "the page has '{needle}'");
    }
    let mut rest = html;
    while let Some(at) = rest.find("http") {
        let url = &rest[at..];
        assert!(
            url.starts_with("http://www.w3.org/1999/xhtml\"")
                || url.starts_with("http://www.w3.org/2000/svg\""),
            "an external URL: {}",
            &url[..url.len().min(60)]
        );
        rest = &rest[at + 4..];
    }
}

/// Run parbench with `args`; it must succeed.
fn succeed(args: &[&str]) {
    parbench().args(args).assert().success();
}

#[test]
fn report_writes_a_self_contained_page_of_a_saved_run() {
    let dir = tempfile::tempdir().unwrap();
    let at = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (json, direct, page) = (at("x.json"), at("direct.html"), at("r.html"));
    let run = |extra: &[&str]| {
        let mut args: Vec<&str> = vec!["async", "--product-size", "64"];
        args.extend(extra);
        args.extend(QUICK);
        succeed(&args);
    };
    run(&["--iterations", "100", "-o", &json, "--html", &direct]);
    succeed(&["report", &json, "-o", &page]);
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(
        html,
        std::fs::read_to_string(&direct).unwrap(),
        "--html and report of the saved JSON give the same page"
    );
    let doc = parse_page(&html);
    assert_self_contained(&html);
    // The bars and the lane timeline (the JSON kept the traced repeat).
    let svgs = doc.descendants().filter(|n| n.has_tag_name("svg")).count();
    assert_eq!(svgs, 2, "bars and the timeline");
    assert!(html.contains("lane timeline of the traced repeat"));
    for variant in ["sync", "push-only", "products-push-only"] {
        assert!(html.contains(&format!(">{variant}<")), "{variant}");
    }
    assert!(html.contains("✓ pass") && !html.contains("✗ FAIL"));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(doc["timelines"].as_array().map(Vec::len), Some(7));

    // A report without traces says so instead of drawing one; the default output is beside it.
    let plain = at("plain.json");
    run(&["--iterations", "10", "-o", &plain]);
    succeed(&["report", &plain]);
    let html = std::fs::read_to_string(at("plain.html")).unwrap();
    parse_page(&html);
    assert!(html.contains("No lane timeline"));
    assert!(!html.contains("lane timeline of the traced repeat"));

    // Two reports: the comparison, with compare's verdicts.
    let both = at("both.html");
    succeed(&["report", &plain, &json, "-o", &both]);
    let html = std::fs::read_to_string(&both).unwrap();
    parse_page(&html);
    assert_self_contained(&html);
    assert!(html.contains("parbench comparison") && html.contains("Verdicts"));
    assert!(html.contains("Nothing to compare") || html.contains("noise"));

    assert_usage_error(&["report", "/nonexistent.json"], "cannot read");
    assert_usage_error(&["report", &json, "-o", &json], "overwrite");
    assert_usage_error(&["report", &json, &json, &json], "no more were expected");
    assert_usage_error(&["report", &json, "-o", "/proc/x/r.html"], "cannot");
}

#[test]
fn the_page_checker_catches_a_broken_page() {
    let good = "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\"><body><p>a</p></body></html>";
    parse_page(good);
    assert_self_contained(good);
    for broken in [
        "<html><body><p>unclosed</body></html>",
        "<html><body>&nbsp;</body></html>",
    ] {
        assert!(std::panic::catch_unwind(|| {
            parse_page(broken);
        })
        .is_err());
    }
    for external in [
        "<html><img src=\"x.png\"/></html>",
        "<html><a href=\"https://example.com\">x</a></html>",
        "<html><script>1</script></html>",
    ] {
        assert!(std::panic::catch_unwind(|| assert_self_contained(external)).is_err());
    }
}

#[test]
fn a_sweep_page_charts_time_and_gflops_against_the_axis() {
    let dir = tempfile::tempdir().unwrap();
    let [journal, report, page] = ["j.jsonl", "s.json", "s.html"]
        .map(|name| dir.path().join(name).to_str().unwrap().to_string());
    let mut args = TWO_AXIS_SWEEP.to_vec();
    args.extend(["--journal", &journal, "-o", &report, "--html", &page]);
    args.extend(QUICK);
    succeed(&args);
    let html = std::fs::read_to_string(&page).unwrap();
    parse_page(&html);
    assert_self_contained(&html);
    assert!(html.contains("matmul: median time vs size"));
    assert!(html.contains("matmul: GFLOP/s vs size"));
    // Legend entries name only the parameter that varies besides the axis.
    assert!(html.contains("(threads=1)") && html.contains("(threads=2)"));
    assert!(
        !html.contains("(threads=1, "),
        "only varying parameters in a legend"
    );
    let lines = parse_page(&html)
        .descendants()
        .filter(|e| e.has_tag_name("polyline"))
        .filter(|e| {
            e.attribute("points")
                .is_some_and(|p| p.split_whitespace().count() == 3)
        })
        .count();
    assert_eq!(
        lines,
        2 + 2 * 2,
        "time: 2 lines; GFLOP/s: 2 figures × 2 lines"
    );
}

#[test]
fn html_output_is_checked_before_anything_runs() {
    assert_usage_error(
        &[
            "async",
            "--iterations",
            "10",
            "--html",
            "/proc/nonexistent/r.html",
        ],
        "cannot write /proc/nonexistent/r.html",
    );
    let dir = tempfile::tempdir().unwrap();
    assert_usage_error(
        &[
            "async",
            "--iterations",
            "10",
            "--html",
            dir.path().to_str().unwrap(),
        ],
        "it is a directory",
    );
}
