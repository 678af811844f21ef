//! The JSON of `compare` and `ab` against their JSON Schemas
//! (`docs/parbench-compare-1.schema.json`, `docs/parbench-ab-1.schema.json`).

use serde_json::Value;

/// Fails with every way `doc` breaks `docs/{schema}.schema.json` (`parbench-1`, the report's;
/// `parbench-compare-1`, `parbench-ab-1`).
pub fn assert_valid(what: &str, schema: &str, doc: &Value) {
    let path = format!("{}/docs/{schema}.schema.json", env!("CARGO_MANIFEST_DIR"));
    let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let validator = jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{path}: {e}"));
    let errors: Vec<String> = validator
        .iter_errors(doc)
        .map(|e| format!("{}: {e}", e.instance_path()))
        .collect();
    assert!(errors.is_empty(), "{what} breaks {path}: {errors:#?}");
}

#[test]
fn every_property_of_both_schemas_is_described() {
    fn walk(v: &Value, at: &str, missing: &mut Vec<String>) {
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (name, p) in props {
                if p.get("description").is_none() {
                    missing.push(format!("{at}/{name}"));
                }
                walk(p, &format!("{at}/{name}"), missing);
            }
        }
        if let Some(items) = v.get("items") {
            walk(items, &format!("{at}[]"), missing);
        }
    }
    for kind in ["compare", "ab"] {
        let path = format!(
            "{}/docs/parbench-{kind}-1.schema.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let mut missing = Vec::new();
        walk(&schema, "", &mut missing);
        assert!(missing.is_empty(), "{path}: no description for {missing:?}");
    }
}
