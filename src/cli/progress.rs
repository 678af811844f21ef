//! Progress bars on stderr, one per scenario.

use std::sync::Arc;

use crate::scenario;

/// The look of every progress bar: `name [=====>    ] 3/10 unit, eta 4s`.
pub(super) fn style_bar(bar: &indicatif::ProgressBar, name: &str, unit: &str) {
    let template = format!("{{msg:>12}} [{{bar:30}}] {{pos}}/{{len}} {unit}, eta {{eta}}");
    if let Ok(style) = indicatif::ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(name.to_string());
}

/// A progress bar on stderr, one per scenario, updated after every sampling round.
pub(super) fn progress_bar(multi: Option<indicatif::MultiProgress>) -> scenario::ProgressFn {
    use indicatif::ProgressBar;
    use std::sync::Mutex;
    let state: Mutex<Option<(String, ProgressBar)>> = Mutex::new(None);
    Arc::new(move |name: &str, p| {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        if !matches!(&*s, Some((n, _)) if n == name) {
            if let Some((_, old)) = s.take() {
                old.finish_and_clear();
            }
            let mut bar = ProgressBar::new(p.rounds_expected as u64);
            if let Some(m) = &multi {
                bar = m.add(bar);
            }
            style_bar(&bar, name, "rounds");
            *s = Some((name.to_string(), bar));
        }
        if let Some((_, bar)) = &*s {
            bar.set_length(p.rounds_expected as u64);
            bar.set_position(p.rounds_done as u64);
            if p.rounds_done >= p.rounds_expected {
                bar.finish_and_clear();
            }
        }
    })
}
