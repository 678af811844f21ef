//! A sweep's axes checked for repeats: `--set size=100 --set size=200` names one parameter
//! twice, and a sweep would run one of them or cross them into points that repeat; a value
//! listed twice in one axis (`--set size=100,100`) would run the same point twice. Both are
//! refused, saying how to write the sweep meant.

/// An axis named twice, or a value listed twice in one axis.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RepeatedAxis {
    #[error("--set names '{name}' twice: list its values in one --set ({name}={first},{second})")]
    Name {
        name: String,
        first: String,
        second: String,
    },
    #[error("--set '{name}' lists the value '{value}' twice")]
    Value { name: String, value: String },
}

/// Refuse `axes` (name, values) that repeat a name, or a value within one axis.
pub(super) fn distinct(axes: &[(String, Vec<String>)]) -> Result<(), RepeatedAxis> {
    for (i, (name, values)) in axes.iter().enumerate() {
        if let Some((_, earlier)) = axes[..i].iter().find(|(n, _)| n == name) {
            return Err(RepeatedAxis::Name {
                name: name.clone(),
                first: shown(earlier),
                second: shown(values),
            });
        }
        for (j, value) in values.iter().enumerate() {
            if values[..j].contains(value) {
                return Err(RepeatedAxis::Value {
                    name: name.clone(),
                    value: value.clone(),
                });
            }
        }
    }
    Ok(())
}

/// An axis's values as a message quotes them: a long range by its first values and its last.
fn shown(values: &[String]) -> String {
    match values {
        [first, second, third, .., last] if values.len() > 6 => {
            format!("{first},{second},{third},…,{last}")
        }
        _ => values.join(","),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(name: &str, values: &[&str]) -> (String, Vec<String>) {
        (name.into(), values.iter().map(|v| v.to_string()).collect())
    }

    #[test]
    fn distinct_axes_pass_and_repeats_are_named() {
        assert_eq!(
            distinct(&[axis("size", &["100", "200"]), axis("threads", &["1"])]),
            Ok(())
        );
        let err = distinct(&[axis("size", &["100"]), axis("size", &["200"])]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set names 'size' twice: list its values in one --set (size=100,200)"
        );
        let err = distinct(&[axis("size", &["100", "200", "100"])]).unwrap_err();
        assert_eq!(err.to_string(), "--set 'size' lists the value '100' twice");
        // A long axis is quoted by its ends.
        let long: Vec<String> = (1..=1000).map(|v| v.to_string()).collect();
        let err = distinct(&[("size".into(), long.clone()), ("size".into(), long)]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--set names 'size' twice: list its values in one --set (size=1,2,3,…,1000,1,2,3,…,1000)"
        );
    }
}
