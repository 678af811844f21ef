//! Reading back an `ab` result (`ab -o FILE`, then `ab --from FILE`): its entries with their
//! pairs, settings and sides. A report, or a `compare` result, is refused in one line that
//! says which command reads it.

use std::path::Path;

use serde_json::Value;

use super::error::CliError;
use crate::report::paired::{BusyPairs, PairedEntry};
use crate::report::provenance::{AbSides, AB_SCHEMA, COMPARE_SCHEMA};
use crate::report::{Better, SCHEMA};

/// The `ab` result at `path` (`parbench-ab/1`, or an older one without a schema), read back:
/// its entries, settings and sides.
pub(super) fn load(path: &Path) -> Result<(Vec<PairedEntry>, Value, AbSides), CliError> {
    let fail =
        |why: String| CliError::Usage(format!("cannot read the A/B run {}: {why}", path.display()));
    let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| fail(e.to_string()))?;
    let not_ab = match doc.get("schema").and_then(Value::as_str) {
        None | Some(AB_SCHEMA) => None,
        Some(SCHEMA) => Some(
            "it is a report (parbench/1), not an `ab` result: `compare` compares two reports"
                .into(),
        ),
        Some(COMPARE_SCHEMA) => {
            Some("it is a `compare` result (parbench-compare/1), not an `ab` result".into())
        }
        Some(other) => Some(format!(
            "it has schema '{other}', this parbench reads '{AB_SCHEMA}'"
        )),
    };
    if let Some(why) = not_ab {
        return Err(fail(why));
    }
    let rows = doc["entries"]
        .as_array()
        .ok_or_else(|| fail("no 'entries' (not the JSON of parbench ab)".into()))?;
    let entries: Vec<PairedEntry> = rows.iter().map(entry).collect();
    let mut seen = std::collections::BTreeSet::new();
    if let Some(repeated) = entries.iter().find(|e| !seen.insert(e.name.as_str())) {
        return Err(fail(format!(
            "it holds the entry {} more than once",
            repeated.name
        )));
    }
    let side = |name: &str| serde_json::from_value(doc[name].clone()).ok().flatten();
    let sides = AbSides {
        base: side("base"),
        candidate: side("candidate"),
    };
    Ok((entries, doc["settings"].clone(), sides))
}

/// One entry of the `entries` list.
fn entry(row: &Value) -> PairedEntry {
    let is_time = row["is_time"].as_bool().unwrap_or(false);
    let better = serde_json::from_value(row["better"].clone()).unwrap_or(if is_time {
        Better::Lower
    } else {
        Better::Neither
    });
    let pairs = row["pairs"]
        .as_array()
        .map(|pairs| {
            pairs
                .iter()
                .filter_map(|p| Some((p["base"].as_f64()?, p["candidate"].as_f64()?)))
                .collect()
        })
        .unwrap_or_default();
    let count = |key: &str| {
        row["busy_pairs"][key]
            .as_u64()
            .and_then(|n| usize::try_from(n).ok())
    };
    let (base, candidate) = (count("base").unwrap_or(0), count("candidate").unwrap_or(0));
    // A result written before the per-pair facts were counted: the fewest pairs whose load
    // differed that its counts allow.
    let busy = BusyPairs {
        base,
        candidate,
        base_alone: count("base_alone").unwrap_or(base.saturating_sub(candidate)),
        candidate_alone: count("candidate_alone").unwrap_or(candidate.saturating_sub(base)),
    };
    PairedEntry {
        name: row["entry"].as_str().unwrap_or("?").to_string(),
        is_time,
        better,
        pairs,
        busy,
    }
}
