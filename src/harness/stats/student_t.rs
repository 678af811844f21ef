//! Student's t distribution: the two-sided p-value of a t statistic, for judging a change
//! against a spread estimated from few runs (`report::noise`). With 3 runs a side the spread
//! has 4 degrees of freedom, and the normal distribution would understate the tails by a
//! factor of ten at p = 0.001.

/// `P(|T| >= |t|)` for `T` with `df` degrees of freedom: `I_x(df/2, 1/2)` with
/// `x = df / (df + t²)`, the regularized incomplete beta function. `None` for `df <= 0` or a
/// `t` that is NaN.
pub fn student_t_p(t: f64, df: f64) -> Option<f64> {
    if df.is_nan() || df <= 0.0 || t.is_nan() {
        return None;
    }
    if t.is_infinite() {
        return Some(0.0);
    }
    let x = df / (df + t * t);
    Some(incomplete_beta(x, df / 2.0, 0.5).clamp(0.0, 1.0))
}

/// The regularized incomplete beta function `I_x(a, b)`, by its continued fraction (Lentz's
/// method) on whichever side converges, as Numerical Recipes' `betai`.
fn incomplete_beta(x: f64, a: f64, b: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let front =
        (ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln()).exp();
    if x < (a + 1.0) / (a + b + 2.0) {
        front * beta_fraction(x, a, b) / a
    } else {
        1.0 - front * beta_fraction(1.0 - x, b, a) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(x: f64, a: f64, b: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    // A term too near zero is replaced by TINY, so that no step divides by zero.
    let nonzero = |v: f64| if v.abs() < TINY { TINY } else { v };
    let mut c = 1.0;
    let mut d = 1.0 / nonzero(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..300 {
        let m = f64::from(m);
        let m2 = 2.0 * m;
        for aa in [
            m * (b - m) * x / ((qam + m2) * (a + m2)),
            -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2)),
        ] {
            d = 1.0 / nonzero(1.0 + aa * d);
            c = nonzero(1.0 + aa / c);
            h *= d * c;
        }
        if (d * c - 1.0).abs() < 1e-15 {
            break;
        }
    }
    h
}

/// `ln Γ(x)` for `x > 0` (Lanczos, g = 7, nine terms: about 15 digits).
fn ln_gamma(x: f64) -> f64 {
    const G: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut sum = G[0];
    for (i, g) in G.iter().enumerate().skip(1) {
        sum += g / (x + i as f64);
    }
    let t = x + 7.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + sum.ln()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn p_values_match_the_t_tables() {
        // Two-sided critical values of Student's t (any statistics table).
        for (t, df, p) in [
            (2.776_445, 4.0, 0.05),
            (8.610_302, 4.0, 0.001),
            (4.604_095, 4.0, 0.01),
            (12.706_205, 1.0, 0.05),
            (2.228_139, 10.0, 0.05),
            (3.645_98, 30.0, 0.001),
        ] {
            let got = student_t_p(t, df).expect("p");
            assert!((got - p).abs() < p * 1e-4, "t={t} df={df}: {got} vs {p}");
        }
        // The Cauchy distribution (df = 1): P(|T| > 1) = 1/2.
        assert!((student_t_p(1.0, 1.0).expect("p") - 0.5).abs() < 1e-12);
        // Many degrees of freedom: the normal's 1.96.
        assert!((student_t_p(1.959_964, 1e7).expect("p") - 0.05).abs() < 1e-5);
        assert_eq!(student_t_p(0.0, 4.0), Some(1.0));
        assert_eq!(
            student_t_p(-2.776_445, 4.0).map(|p| (p * 1e4).round()),
            Some(500.0)
        );
        assert_eq!(student_t_p(f64::INFINITY, 4.0), Some(0.0));
        assert_eq!(student_t_p(1.0, 0.0), None);
        assert_eq!(student_t_p(f64::NAN, 3.0), None);
    }

    #[test]
    fn ln_gamma_of_whole_and_half_numbers() {
        assert!(ln_gamma(1.0).abs() < 1e-13);
        assert!((ln_gamma(5.0) - 24f64.ln()).abs() < 1e-12);
        let half = std::f64::consts::PI.sqrt().ln();
        assert!((ln_gamma(0.5) - half).abs() < 1e-12);
    }
}
